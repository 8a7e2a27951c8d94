"""The command line of an analyser of finished runs (cue_memory.py, maze_memory.py,
memory_growth.py, tmaze_policy.py):

    python -m experiments.NAME RUN_DIR [RUN_DIR ...]

reads each run folder (or checkpoint file) in turn, on one thread, and prints what it finds. A
run the analyser cannot read (another env or core: UnfitRun) ends the command with exit status 2
and the analyser's message, as a bad flag does.
"""

from __future__ import annotations

import argparse
from typing import Callable

import torch


class UnfitRun(ValueError):
    """A run an analyser cannot read: the message names the run and what the analyser needs."""


def analyse_runs(description: str, runs: str, report: Callable[[str], None], argv: list[str] | None = None) -> None:
    """Parse the command line (`description`: the analyser's docstring; `runs`: which runs it
    takes), then `report(run_dir)` for each run given; exit 2 on the first UnfitRun."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help=runs)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for run_dir in args.runs:
        try:
            report(run_dir)
        except UnfitRun as error:
            parser.error(str(error))
