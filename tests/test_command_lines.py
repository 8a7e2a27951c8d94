"""Every command line refuses a flag it does not have, prefixes included (allow_abbrev=False):
argparse would otherwise take a unique prefix for the whole flag, so that `--lr nan` set
--lr-schedule, and a flag added later would silently change what an old command means."""

import argparse
import importlib
import inspect
import pkgutil
import sys

import pytest

from agents.command_line import make_parser
from agents.learners.train import Trainer

PACKAGES = ("agents", "envs", "experiments", "benchmarks", "seqtasks")
SCRIPTS = ("train_a2c", "train_ppo", "train_dqn", "evaluate")  # the repository root's own


def command_modules() -> list[str]:
    """The modules with a command line: an argparse user (or a root script) whose `main` runs
    with no arguments, as `python -m MODULE` runs it."""
    names = list(SCRIPTS)
    for package in PACKAGES:
        names += [info.name for info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}.")]
    commands = []
    for name in names:
        module = importlib.import_module(name)
        main = getattr(module, "main", None)
        if (name in SCRIPTS or getattr(module, "argparse", None) is argparse) and callable(main):
            try:
                inspect.signature(main).bind()
            except TypeError:
                continue  # a helper the commands share (agents/command_line.py's main takes the trainer)
            commands.append(name)
    return commands


COMMANDS = command_modules()


class Parsing(Exception):
    """Raised in place of parsing, with the parser a command line built."""

    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__(parser.prog)
        self.parser = parser


def test_the_command_lines_are_found():
    assert {"train_a2c", "evaluate", "envs.play", "experiments.mazes", "benchmarks.cores", "seqtasks.__main__"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_line_refuses_abbreviated_flags(name, monkeypatch):
    def stop(self, args=None, namespace=None):
        raise Parsing(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", stop)
    monkeypatch.setattr(sys, "argv", [name])
    with pytest.raises(Parsing) as parsing:
        importlib.import_module(name).main()
    assert parsing.value.parser.allow_abbrev is False, f"{name}'s parser takes abbreviated flags"


def test_a_prefix_of_a_trainer_flag_is_refused_not_taken_for_it(capsys):
    with pytest.raises(SystemExit) as exit_info:
        make_parser(Trainer, "").parse_args(["--env", "corridor", "--lr", "0.1"])  # --lr is a prefix of --lr-schedule
    assert exit_info.value.code == 2 and "unrecognized arguments: --lr 0.1" in capsys.readouterr().err
