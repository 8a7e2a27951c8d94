"""An experiment's training flags checked before it writes anything: each run's flags (its own and
the user's --train-args) must make a run train_a2c.py, train_ppo.py or train_dqn.py would start, so that a bad
value (a NaN learning rate, an unknown flag, a quote left open) is refused at once, by name, with
exit 2, and not found in the first run's log after the sweep's files are written."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from durable.records import read_record


class FlagError(ValueError):
    """A training flag the trainer's own parser refuses; the message is its usage error."""


def split_train_args(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """--train-args as a list of flags; exit 2 naming it if it does not split (an open quote)."""
    try:
        return shlex.split(text)
    except ValueError as error:
        parser.error(f"--train-args {text!r}: {error}")


def check_train_flags(parser: argparse.ArgumentParser, algo: str, train_args: list[str]) -> None:
    """Exit 2 (parser.error, naming the bad value) unless `python train_ALGO.py TRAIN_ARGS` would
    start a new run: the trainer's parser and its config's checks (agents/command_line.py:
    new_run_config), without building the run."""
    from agents.command_line import make_parser, new_run_config
    from agents.learners.dqn.trainer import DQNTrainer
    from agents.learners.ppo import PPOTrainer
    from agents.learners.train import Trainer

    trainer_class = {"a2c": Trainer, "ppo": PPOTrainer, "dqn": DQNTrainer}[algo]
    trainer_parser = make_parser(trainer_class, "")

    def refuse(message: str):
        raise FlagError(message)

    trainer_parser.error = refuse
    try:
        new_run_config(trainer_class, trainer_parser.parse_args(train_args))
    except (FlagError, ValueError) as error:
        parser.error(f"the runs' training flags ({shlex.join(train_args)}) are refused by train_{algo}.py: {error}")


def refuse_other_train_args(parser: argparse.ArgumentParser, results: Path, train_args: str) -> None:
    """Exit 2 where the sweep's results (`results`, its NAME.json) were made with other
    --train-args: its finished runs would be reused and reported under flags they never trained
    with. A file that cannot be read says nothing (the runs' own records are checked too:
    experiments/frame/jobs.py, Job.settings)."""
    summary = read_record(results)
    if isinstance(summary, dict) and "train_args" in summary and summary["train_args"] != train_args:
        parser.error(f"{results} was made with --train-args {summary['train_args']!r}, not {train_args!r}; its runs would be reused "
                     "under flags they did not train with: give these runs a --name of their own")


def refuse_unusable_paths(parser: argparse.ArgumentParser, runs_dir: Path, ledger: Path | None) -> None:
    """Exit 2 for a runs folder that is a file (or under one) and a ledger that is a folder."""
    for folder in (runs_dir, *runs_dir.parents):
        if folder.exists() and not folder.is_dir():
            parser.error(f"--runs-dir {runs_dir}: {folder} is a file, not a folder")
    if ledger is not None and ledger.is_dir():
        parser.error(f"--ledger {ledger} is a folder; give the path of a JSON file")
