"""Train and test one model on one toy task:

    python -m seqtasks --task random_walk --core feedback
    python -m seqtasks --task algorithmic --n-vars 5 --core lstm --preset paper --device cuda
    python -m seqtasks --task adding --seq-length 1000 --variable-length --core ffattn
    python -m seqtasks --task copy --core transformer --core-opt span=50,dropout=0.1
    python -m seqtasks --resume runs/seq-random_walk-feedback-20250101-120000
    torchrun --nproc-per-node 2 -m seqtasks --task random_walk --core feedback   # the batch's rows split in two

Every field of seqtasks.config.SeqConfig is a flag (--help lists them with their defaults).
The first line printed names the core and its options (the Feedback core's `step`, the path its
steps take, among them); the resolved config is printed and saved in the run folder; the last
line printed is one JSON object with the test metrics (also saved as results.json there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from agents.runtime import distributed
from agents.runtime.checkpoint import CheckpointError, existing_checkpoint, run_checkpoint
from agents.config.config_cli import add_config_arguments, core_line, given_fields, parse_core_options, run_core_options
from agents.runtime.device import resolve_device
from agents.runtime.finite_watch import NonFiniteError
from durable.interrupt import exit_interrupted, stop_signals_raise
from agents.runtime.run_folder import RunFolderError, claim_until
from seqtasks.config import SeqConfig, resolve_config
from seqtasks.models import SEQUENCE_ONLY
from seqtasks.train import Run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m seqtasks", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_arguments(parser, SeqConfig)
    parser.add_argument("--core-opt", action="append", default=[], metavar="KEY=VALUE[,...]", help="an option of the core's own config (repeatable)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR (may change only --max-updates, --max-minutes, --save-every, --device, --threads)")
    parser.add_argument("--overwrite", action="store_true",
                        help="start a new run in a --run-dir that holds one, deleting it (without this, such a folder is refused)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def make_run(args: argparse.Namespace, parser: argparse.ArgumentParser, quiet: bool = False, held: ExitStack | None = None) -> Run:
    """The run the arguments ask for; any bad value ends in parser.error (exit code 2). Prints
    the preset and the resolved config unless `quiet`. With `held` (the command line's), the run
    folder is claimed until `held` closes (agents/runtime/run_folder.py): one that is another run's ends
    in parser.error too."""
    given = given_fields(args, SeqConfig)
    try:
        if args.resume and args.overwrite:
            raise ValueError("--overwrite starts a new run; --resume continues one: give one of them")
        if args.resume:
            if args.core_opt:
                raise ValueError(f"--resume continues a run with its saved core options; drop --core-opt {','.join(args.core_opt)}")
            claim_until(held, existing_checkpoint(args.resume).parent, resume=True)
            run = Run.resume(args.resume, given)  # its core's run choices hold where they can, else are made again here
            if run.world.main:
                print(core_line(run.config.core, run.core_options), file=sys.stderr)
                print(f"resuming {args.resume} at update {run.update}", file=sys.stderr)
            return run
        cuda = resolve_device(given.get("device", SeqConfig.device)).type == "cuda"
        config, preset = resolve_config(given, cuda)
        if config.core in SEQUENCE_ONLY:
            if args.core_opt:
                raise ValueError(f"core {config.core!r} takes no --core-opt options (its width is --d-model), got --core-opt {','.join(args.core_opt)}")
            core_options = {}
        else:
            core_options = run_options(config, parse_core_options(config.core, args.core_opt))  # the run's choices, made once and saved with it
        run_dir = config.run_dir or f"runs/seq-{config.task}-{config.core}-{time.strftime('%Y%m%d-%H%M%S')}"
        run = Run(config, core_options, Path(run_dir))  # nothing written yet: a refused run leaves no folder
        claim_until(held, run_dir, resume=False, overwrite=args.overwrite)
        run.write_config()
    except (ValueError, CheckpointError, RunFolderError) as error:
        parser.error(str(error))
    if quiet or not run.world.main:
        return run
    reason = "a GPU is used" if cuda else "no GPU is used"
    print(core_line(config.core, core_options), file=sys.stderr)
    print(f"preset {preset} ({'chosen' if given.get('preset', 'auto') != 'auto' else 'auto: ' + reason}); run folder {run.run_dir}", file=sys.stderr)
    print(json.dumps(run.describe(), indent=2), file=sys.stderr)
    return run


def run_options(config: SeqConfig, core_options: dict) -> dict:
    """The core options a run with `config` builds its core with (config_cli.run_core_options);
    the sequence-only models take none."""
    if config.core in SEQUENCE_ONLY:
        return core_options
    return run_core_options(config.core, core_options, config.device, config.precision)


def main(argv: list[str] | None = None) -> dict:
    """Ctrl-C, SIGTERM, SIGHUP or SIGUSR2 at any point ends with exit code 128 + the signal (130
    for Ctrl-C, 143 for SIGTERM) and a line saying whether and how the run can be resumed
    (seqtasks/train.py: Run.train keeps the checkpoint whole). Under torchrun every rank runs
    this and rank 0 prints; a rank that dies ends the others with an error."""
    with stop_signals_raise(), ExitStack() as held:
        parser = build_parser()
        run = None
        try:
            args = parser.parse_args(argv)
            run = make_run(args, parser, held=held)
            try:
                results = run.train(progress=not args.no_progress)
            except distributed.RankError as error:
                sys.exit(f"training stopped (process {run.world.rank} of {run.world.size}): {error}\nthe last checkpoint is in {run.run_dir}")
            except (NonFiniteError, CheckpointError) as error:  # CheckpointError: a save the disk refused
                sys.exit(f"training stopped: {error}")
            except OSError as error:  # a log or record the disk refused (full, read-only)
                sys.exit(f"training stopped: could not write {error.filename or 'to the run folder'}: {error.strerror or error}; "
                         f"the last checkpoint, if any, is kept")
            finally:
                distributed.close()
            if run.world.main:
                print(json.dumps(results))
        except KeyboardInterrupt as interrupt:
            if run is not None and run_checkpoint(run.run_dir).is_file():
                exit_interrupted(f"at update {run.update}; resume with python -m seqtasks --resume {run.run_dir}", interrupt)
            exit_interrupted("while setting up; nothing was saved", interrupt)
    return results


if __name__ == "__main__":
    distributed.run_command(main)
