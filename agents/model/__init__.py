"""The policy network around a memory core: one observation encoder per space (encoders/), the
previous action and reward, the core, the actor and critic heads (policy.py); what it takes for a
run of steps, as one record (step_inputs.py).

May import agents.runtime (the flat observation layout), agents.cores, envs and durable.
"""
