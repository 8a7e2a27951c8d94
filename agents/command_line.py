"""The command line both trainers share (train_a2c.py, train_ppo.py): flags from the trainer's
config dataclass, --resume, --core-opt and --env-opt, the run, and how it ends (a stop signal, a
dead actor worker or rank). Each script is this with its trainer class and its docstring.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from contextlib import ExitStack

from agents.runtime import distributed
from agents.config.a2c_config import A2CConfig, resolve_config
from agents.runtime.actors import ActorError
from agents.runtime.checkpoint import CheckpointError, existing_checkpoint, run_checkpoint
from agents.config.config_cli import (
    add_config_arguments, core_line, flag_name, given_fields, parse_core_options, parse_env_options, run_core_options,
)
from agents.config.settings_file import read_settings
from agents.runtime.finite_watch import NonFiniteError
from durable.interrupt import exit_interrupted, stop_signals_raise
from agents.runtime.run_folder import RunFolderError, claim_until
from agents.learners.train import RESUMABLE_OVERRIDES, Trainer


def make_parser(trainer_class: type[Trainer], description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint (run folder or file)")
    parser.add_argument("--config", metavar="FILE",
                        help="settings file (JSON, as python -m experiments.tune writes: agents/config/settings_file.py); "
                             "the flags given beside it win")
    parser.add_argument("--overwrite", action="store_true",
                        help="start a new run in a --run-dir that holds one, deleting it (without this, such a folder is refused)")
    parser.add_argument("--env-module", action="append", default=[], metavar="MODULE",
                        help="with --resume: let the checkpoint's env id import MODULE (module:EnvId); only minigrid, popgym "
                             "and modules named here are imported from a checkpoint (repeatable)")
    parser.add_argument("--core-opt", action="append", default=[], metavar="KEY=VALUE", help="core option, e.g. span=100 (repeatable)")
    parser.add_argument("--env-opt", action="append", default=[], metavar="KEY=VALUE", help="env constructor option, e.g. length=8 (repeatable)")
    add_config_arguments(parser, trainer_class.config_class, exclude=("core_options", "env_options"))
    return parser


def new_run_config(trainer_class: type[Trainer], args: argparse.Namespace) -> A2CConfig:
    """A new run's config from its parsed flags: the settings file (--config), then the flags
    given, the preset under them, the core's run choices made once (saved with the run); a
    ValueError (or CheckpointError, RunFolderError) for a bad value. The experiments check their
    runs' flags with it before they write anything (experiments/frame/train_flags.py)."""
    config_class = trainer_class.config_class
    given = given_fields(args, config_class)
    if args.config:
        settings = read_settings(args.config, config_class, trainer_class.script)
        given = {**settings, **given}
    core = given.get("core", config_class.core)
    given["core_options"] = {**given.get("core_options", {}), **parse_core_options(core, args.core_opt)}
    given["env_options"] = {**given.get("env_options", {}), **parse_env_options(args.env_opt)}
    config = resolve_config(given, config_class)
    options = run_core_options(config.core, config.core_options, config.device, config.precision)
    return dataclasses.replace(config, core_options=options)  # the run's choices, made once and saved with it


def make_trainer(trainer_class: type[Trainer], args: argparse.Namespace, parser: argparse.ArgumentParser,
                 held: ExitStack | None = None) -> Trainer:
    """The trainer the arguments ask for; any bad value ends in parser.error (exit code 2). With
    `held` (the command line's), its run folder is claimed for it until `held` closes
    (agents/runtime/run_folder.py), and a folder that is another run's ends in parser.error too; without,
    the caller owns the folder (the experiments' in-process estimates)."""
    config_class = trainer_class.config_class
    given = given_fields(args, config_class)
    try:
        if args.resume and args.overwrite:
            parser.error("--overwrite starts a new run; --resume continues one: give one of them")
        if args.env_module and not args.resume:
            parser.error(f"--env-module is for --resume; a new run imports the module of its --env {args.env_module[0]}:ENV_ID itself")
        if args.resume:
            refused = [f"{flag_name(name)} {given[name]}" for name in sorted(set(given) - RESUMABLE_OVERRIDES)]
            refused += [f"--core-opt {item}" for item in args.core_opt] + [f"--env-opt {item}" for item in args.env_opt]
            refused += [f"--config {args.config}"] if args.config else []
            if refused:
                allowed = ", ".join(flag_name(name) for name in sorted(RESUMABLE_OVERRIDES))
                parser.error(f"--resume keeps the run's config; {', '.join(refused)} would change it (only {allowed} may be given)")
            claim_until(held, existing_checkpoint(args.resume).parent, resume=True)
            # its core's run choices hold where they can, else are made again here (config_from_checkpoint)
            return trainer_class.from_checkpoint(args.resume, given, env_modules=args.env_module)
        trainer = trainer_class(new_run_config(trainer_class, args))  # nothing written yet: a refused run leaves no folder
        try:
            claim_until(held, trainer.config.run_dir, resume=False, overwrite=args.overwrite)
        except BaseException:
            trainer.close()
            raise
        return trainer
    except (ValueError, CheckpointError, RunFolderError) as error:
        parser.error(str(error))


def main(trainer_class: type[Trainer], description: str, argv: list[str] | None = None) -> None:
    """Ctrl-C, SIGTERM, SIGHUP or SIGUSR2 at any point ends with exit code 128 + the signal (130
    for Ctrl-C, 143 for SIGTERM) and a line saying whether and how the run can be resumed
    (agents/learners/train.py: Trainer.train keeps the checkpoint whole). Under torchrun
    every rank runs this; rank 0 prints the core line (config_cli.core_line: the Feedback core's
    step path among its options), then the config, and a rank that dies ends the others with
    an error (distributed.RankError) and the last checkpoint as it was."""
    with stop_signals_raise(), ExitStack() as held:
        parser = make_parser(trainer_class, description)
        trainer = None
        try:
            args = parser.parse_args(argv)
            trainer = make_trainer(trainer_class, args, parser, held)
            if trainer.world.main:
                print(core_line(trainer.config.core, trainer.config.core_options))
                if args.resume:
                    print(f"resuming {trainer.config.run_dir} at step {trainer.global_step:,}: {trainer.resumed_how}")
                print(json.dumps(trainer.config.to_dict(), indent=2))
            try:
                trainer.train()
            except (ActorError, distributed.RankError) as error:
                where = f" (process {trainer.world.rank} of {trainer.world.size})" if trainer.world.size > 1 else ""
                sys.exit(f"training stopped{where}: {error}\nthe last checkpoint is in {trainer.config.run_dir}")
            except (NonFiniteError, CheckpointError) as error:  # CheckpointError: a save the disk refused
                sys.exit(f"training stopped: {error}")
            except OSError as error:  # a log or record the disk refused (full, read-only)
                sys.exit(f"training stopped: could not write {error.filename or 'to the run folder'}: {error.strerror or error}; "
                         f"the last checkpoint, if any, is kept")
            finally:
                trainer.close()
                distributed.close()
        except KeyboardInterrupt as interrupt:
            if trainer is not None and run_checkpoint(trainer.config.run_dir).is_file():
                exit_interrupted(f"at step {trainer.global_step:,}; continue with --resume {trainer.config.run_dir}", interrupt)
            exit_interrupted("while setting up; nothing was saved", interrupt)
