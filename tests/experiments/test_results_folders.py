"""assets/ holds one folder per experiment, and each runner writes there without --out
(experiments/frame/flags.py: results_folder): a sweep run again from its committed command finds
its ledger in that folder and trains none of the runs the ledger holds."""

import importlib
import json
import shlex
from pathlib import Path

import pytest

from experiments.frame.flags import ASSETS, add_experiment_arguments, results_folder

# runner -> the folder of assets/ it writes to without --out
FOLDERS = {"corridor_span": "corridor_span", "feedback_forgetting": "feedback_forgetting", "ffattn_diagnostics": "ffattn_diagnostics",
           "head_init": "head_init", "long_sequences": "long_sequences", "mazes": "mazes", "memory_reach": "memory_reach",
           "ppo_peers": "ppo_peers", "seq_variants": "seq_variants", "tune": "tune", "window_cost": "window_cost",
           "memory_length_answer": "memory_length", "cliff_budget": "memory_length", "recall_cliff": "memory_length",
           "memory_length": "memory_length", "frames_to_solve": "memory_length", "tmaze_answer": "memory_length"}


class Resumed(Exception):
    """Raised in place of running a resumed sweep's stages, once its jobs are checked."""


@pytest.mark.parametrize("runner, folder", list(FOLDERS.items()))
def test_each_runner_writes_to_its_folder_of_assets(runner, folder):
    parser = importlib.import_module(f"experiments.{runner}").make_parser()
    out = next(action.default for action in parser._actions if action.dest == "out")
    assert out == ASSETS / folder and out.is_dir(), f"experiments.{runner} writes to {out}, not {ASSETS / folder}"


def test_a_folder_is_one_name_under_assets():
    assert results_folder("mazes") == ASSETS / "mazes"
    for bad in ("", "a/b", "../elsewhere"):
        with pytest.raises(ValueError, match="one folder name under assets/"):
            results_folder(bad)
    import argparse

    parser = argparse.ArgumentParser()
    add_experiment_arguments(parser, "x", "stem", folder="memory_length")
    assert parser.parse_args([]).out == ASSETS / "memory_length"


def resumed_jobs(monkeypatch, main, argv: list[str]) -> list:
    """The jobs a sweep's stages would run when `main(argv)` is run again, stopped before any runs."""
    from experiments import memory_length

    stages = []

    def check_instead(given, args):
        stages.extend(job for jobs in given.values() for job in jobs)
        raise Resumed

    monkeypatch.setattr(memory_length, "run_stages", check_instead)
    with pytest.raises(Resumed):
        main(argv)
    return stages


def stored_argv(stem: str) -> list[str]:
    """The flags of the command stored in assets/memory_length/STEM.json."""
    command = json.loads((ASSETS / "memory_length" / f"{stem}.json").read_text())["command"]
    return shlex.split(command)[3:]  # "python -m experiments.NAME ..."


def test_a_budget_check_resumed_after_the_move_finds_its_ledger_and_trains_nothing(monkeypatch, tmp_path):
    from experiments import cliff_budget

    ledger = ASSETS / "memory_length" / "memory_length_recall_beyond_budget_runs.json"
    kept = json.loads(ledger.read_text())
    jobs = resumed_jobs(monkeypatch, cliff_budget.main, [*stored_argv("memory_length_recall_beyond_budget"), "--runs-dir", str(tmp_path)])
    trained = [job for job in jobs if job.record.name == "train.done.json"]
    assert len(trained) == 3 and all(Path(job.record).parent.relative_to(tmp_path).as_posix() in kept for job in trained)
    assert all(job.done for job in jobs), [job.name for job in jobs if not job.done]


def test_a_sweep_resumed_after_the_move_finds_its_ledger_and_trains_nothing(monkeypatch, tmp_path):
    from experiments import memory_length

    stem = "memory_length_recall_beyond_1024_4x"
    kept = json.loads((ASSETS / "memory_length" / f"{stem}_runs.json").read_text())
    jobs = resumed_jobs(monkeypatch, memory_length.main, [*stored_argv(stem), "--runs-dir", str(tmp_path)])
    trained = [job for job in jobs if job.record.name == "train.done.json"]
    assert sorted(Path(job.record).parent.relative_to(tmp_path).as_posix() for job in trained) == sorted(kept)
    assert all(job.done for job in jobs), [job.name for job in jobs if not job.done]
