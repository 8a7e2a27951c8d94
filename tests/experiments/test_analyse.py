"""experiments/frame/analyse.py: the command line the analysers of finished runs share."""

import pytest
import torch

from experiments.frame.analyse import UnfitRun, analyse_runs


def test_each_run_is_reported_in_turn_on_one_thread(monkeypatch):
    seen = []
    monkeypatch.setattr(torch, "set_num_threads", lambda n: seen.append(("threads", n)))
    analyse_runs("doc", "run folders", lambda run_dir: seen.append(run_dir), ["a", "b"])
    assert seen == [("threads", 1), "a", "b"]


def test_a_run_the_analyser_cannot_read_exits_2_with_its_message(capsys):
    def report(run_dir):
        raise UnfitRun(f"{run_dir} was trained on 'maze'; this needs a corridor run")

    with pytest.raises(SystemExit) as exit_info:
        analyse_runs("doc", "run folders", report, ["runs/x"])
    assert exit_info.value.code == 2
    assert "error: runs/x was trained on 'maze'; this needs a corridor run" in capsys.readouterr().err


def test_no_run_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        analyse_runs("doc", "run folders", print, [])
    assert exit_info.value.code == 2 and "the following arguments are required: runs" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["cue_memory", "maze_memory", "memory_growth", "tmaze_policy"])
def test_every_analyser_refuses_abbreviated_flags(name, monkeypatch):
    """tests/test_command_lines.py finds command lines by their argparse import, which the
    analysers left to experiments/frame/analyse.py: this checks theirs."""
    import argparse
    import importlib

    parsers = []
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", lambda self, args=None: parsers.append(self) or argparse.Namespace(runs=[]))
    importlib.import_module(f"experiments.{name}").main([])
    assert [parser.allow_abbrev for parser in parsers] == [False]
