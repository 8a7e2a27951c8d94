"""The policy network around a memory core: one observation encoder per space (encoders/), the
previous action and reward, the core, the actor and critic heads (policy.py).

May import agents.runtime (the flat observation layout), agents.cores, envs and durable.
"""
