"""The learners: acting for a rollout (rollout.py), the gradient window before it (window.py,
episode_packing.py), the A2C and PPO losses (a2c.py, ppo.py) and the training loop (train.py).

May import agents.config, agents.model, agents.runtime, agents.cores, envs and durable.
"""
