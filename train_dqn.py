"""Train a recurrent DQN with sequence replay and a memory core, on the suite's envs or any Gymnasium env.

    python train_dqn.py --env tmaze --core lstm --env-opt length=16 --total-steps 300000
    python train_dqn.py --env memory_length --core gru --core-opt init=chrono --replay episodes
    python train_dqn.py --env corridor --core lstm --replay segments --segment-length 40 --burn-in 20 --n-step 5
    python train_dqn.py --resume runs/tmaze-lstm-20261206-090000 --total-steps 600000

Everything but the learner is train_a2c.py's (envs, encoders, cores, presets, actor workers,
TensorBoard, checkpoints and exact resume, stop signals, the run folder and its lock); one process
only (no torchrun). The replay (whole episodes where the env bounds them, else R2D2 segments with
the core state at their start and a burn-in), double DQN, n-step targets, the target network and
the epsilon schedules: agents/learners/dqn/ and docs/training.md. Every field of
agents/config/dqn_config.py:DQNConfig is a flag. evaluate.py RUN --greedy scores its checkpoints.
"""

from __future__ import annotations

# The imports are in the functions below: actor workers (agents/runtime/actors.py, spawned) import
# this script as their main module, and need no torch, whose import is 2.5 s of CPU each.


def main(argv: list[str] | None = None) -> None:
    """agents/command_line.py: main, with the DQN trainer."""
    from agents import command_line
    from agents.learners.dqn.trainer import DQNTrainer

    command_line.main(DQNTrainer, __doc__, argv)


if __name__ == "__main__":
    from agents.runtime import distributed

    distributed.run_command(main)
