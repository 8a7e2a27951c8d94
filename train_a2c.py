"""Train an A2C agent with a memory core on one of the memory environments, or any Gymnasium env.

    python train_a2c.py --env maze --core feedback
    python train_a2c.py --env corridor --core lstm --total-steps 300000 --core-opt hidden_size=64
    python train_a2c.py --env minigrid:MiniGrid-MemoryS7-v0 --core feedback    # pip install -e ".[minigrid]"
    python train_a2c.py --resume runs/maze-feedback-20261121-120000 --total-steps 5000000
    torchrun --nproc-per-node 2 train_a2c.py --env maze --core feedback --num-envs 128   # 64 envs a process

Every field of agents/a2c_config.py:A2CConfig is a flag; core options go through
`--core-opt KEY=VALUE` (repeatable, or comma separated), env options through `--env-opt`.
TensorBoard: `tensorboard --logdir runs`.
"""

from __future__ import annotations

import argparse
import json
import sys

from agents import distributed
from agents.a2c_config import A2CConfig, resolve_config
from agents.actors import ActorError
from agents.checkpoint import CheckpointError, run_checkpoint
from agents.config_cli import (
    add_config_arguments,
    flag_name,
    given_fields,
    parse_core_options,
    parse_env_options,
)
from agents.interrupt import exit_interrupted, ignore_stop_signals, stop_signals_raise
from agents.train import RESUMABLE_OVERRIDES, Trainer


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint (run folder or file)")
    parser.add_argument("--core-opt", action="append", default=[], metavar="KEY=VALUE", help="core option, e.g. span=100 (repeatable)")
    parser.add_argument("--env-opt", action="append", default=[], metavar="KEY=VALUE", help="env constructor option, e.g. length=8 (repeatable)")
    add_config_arguments(parser, A2CConfig, exclude=("core_options", "env_options"))
    return parser


def make_trainer(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Trainer:
    """The trainer the arguments ask for; any bad value ends in parser.error (exit code 2)."""
    given = given_fields(args, A2CConfig)
    try:
        if args.resume:
            refused = [f"{flag_name(name)} {given[name]}" for name in sorted(set(given) - RESUMABLE_OVERRIDES)]
            refused += [f"--core-opt {item}" for item in args.core_opt] + [f"--env-opt {item}" for item in args.env_opt]
            if refused:
                allowed = ", ".join(flag_name(name) for name in sorted(RESUMABLE_OVERRIDES))
                parser.error(f"--resume keeps the run's config; {', '.join(refused)} would change it (only {allowed} may be given)")
            trainer = Trainer.from_checkpoint(args.resume, given)
            if trainer.world.main:
                print(f"resuming {trainer.config.run_dir} at step {trainer.global_step:,}: {trainer.resumed_how}")
            return trainer
        given["core_options"] = parse_core_options(given.get("core", A2CConfig.core), args.core_opt)
        given["env_options"] = parse_env_options(args.env_opt)
        return Trainer(resolve_config(given))
    except (ValueError, CheckpointError) as error:
        parser.error(str(error))


def main(argv: list[str] | None = None) -> None:
    """Ctrl-C, SIGTERM, SIGHUP or SIGUSR2 at any point ends with exit code 128 + the signal (130
    for Ctrl-C, 143 for SIGTERM) and a line saying whether and how the run can be resumed
    (agents/train.py: Trainer.train keeps the checkpoint whole). Under torchrun
    every rank runs this; rank 0 prints the config, and a rank that dies ends the others with
    an error (distributed.RankError) and the last checkpoint as it was."""
    with stop_signals_raise():
        parser = make_parser()
        trainer = None
        try:
            args = parser.parse_args(argv)
            trainer = make_trainer(args, parser)
            if trainer.world.main:
                print(json.dumps(trainer.config.to_dict(), indent=2))
            try:
                trainer.train()
            except (ActorError, distributed.RankError) as error:
                where = f" (process {trainer.world.rank} of {trainer.world.size})" if trainer.world.size > 1 else ""
                sys.exit(f"training stopped{where}: {error}\nthe last checkpoint is in {trainer.config.run_dir}")
            finally:
                trainer.close()
                distributed.close()
        except KeyboardInterrupt as interrupt:
            if trainer is not None and run_checkpoint(trainer.config.run_dir).is_file():
                exit_interrupted(f"at step {trainer.global_step:,}; continue with --resume {trainer.config.run_dir}", interrupt)
            exit_interrupted("while setting up; nothing was saved", interrupt)


if __name__ == "__main__":
    main()
    ignore_stop_signals()  # done and reported: a signal while Python shuts down has nothing to stop
