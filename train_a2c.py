"""Train an A2C agent with a memory core on one of the memory environments, or any Gymnasium env.

    python train_a2c.py --env maze --core feedback
    python train_a2c.py --env corridor --core lstm --total-steps 300000 --core-opt hidden_size=64
    python train_a2c.py --env minigrid:MiniGrid-MemoryS7-v0 --core feedback    # pip install -e ".[minigrid]"
    python train_a2c.py --resume runs/maze-feedback-20261121-120000 --total-steps 5000000
    torchrun --nproc-per-node 2 train_a2c.py --env maze --core feedback --num-envs 128   # 64 envs a process

Every field of agents/config/a2c_config.py:A2CConfig is a flag; core options go through
`--core-opt KEY=VALUE` (repeatable, or comma separated), env options through `--env-opt`.
TensorBoard: `tensorboard --logdir runs`.
"""

from __future__ import annotations

# The imports are in the functions below: actor workers (agents/runtime/actors.py, spawned) import
# this script as their main module, and need no torch, whose import is 2.5 s of CPU each.


def main(argv: list[str] | None = None) -> None:
    """agents/command_line.py: main, with the A2C trainer."""
    from agents import command_line
    from agents.learners.train import Trainer

    command_line.main(Trainer, __doc__, argv)


if __name__ == "__main__":
    from agents.runtime import distributed

    distributed.run_command(main)
