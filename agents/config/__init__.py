"""Every setting of a run: the A2C and PPO config dataclasses with their presets (a2c_config.py,
ppo_config.py) and the core options as command-line flags (config_cli.py).

May import agents.model, agents.runtime, agents.cores, envs and durable.
"""
