"""What runs a learner but knows nothing of its loss: env stepping in worker processes (actors.py,
observations.py), host-to-device copies (staging.py), torchrun (distributed.py), checkpoints and
the run folder (checkpoint.py, run_folder.py, finite_watch.py), seeds, device and precision.

May import envs and durable; never agents.cores, agents.model, the config or the learners.
"""
