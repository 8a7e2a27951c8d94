"""Train a PPO agent with a memory core on one of the memory environments, or any Gymnasium env.

    python train_ppo.py --env maze --core feedback
    python train_ppo.py --env corridor --core lstm --total-steps 300000 --update-epochs 4 --num-minibatches 4
    python train_ppo.py --env minigrid:MiniGrid-MemoryS7-v0 --core transformer --clip-coef 0.2 --norm-adv
    python train_ppo.py --resume runs/maze-feedback-20261121-120000 --total-steps 5000000
    torchrun --nproc-per-node 2 train_ppo.py --env maze --core lstm --num-envs 128

Everything but the update is train_a2c.py's (envs, encoders, cores, presets, actor workers,
TensorBoard, checkpoints and exact resume, stop signals, torchrun, the device); evaluate.py
scores its checkpoints unchanged. Every field of agents/config/ppo_config.py:PPOConfig is a flag, under
CleanRL's names for PPO's own (--update-epochs, --num-minibatches, --clip-coef, --clip-vloss,
--norm-adv, --target-kl, --gae-lambda; CleanRL's --anneal-lr is --lr-schedule linear). How the
core's memory is handled across epochs and minibatches: agents/learners/ppo.py and docs/training.md.
"""

from __future__ import annotations

# The imports are in the functions below: actor workers (agents/runtime/actors.py, spawned) import
# this script as their main module, and need no torch, whose import is 2.5 s of CPU each.


def main(argv: list[str] | None = None) -> None:
    """agents/command_line.py: main, with the PPO trainer."""
    from agents import command_line
    from agents.learners.ppo import PPOTrainer

    command_line.main(PPOTrainer, __doc__, argv)


if __name__ == "__main__":
    from agents.runtime import distributed

    distributed.run_command(main)
