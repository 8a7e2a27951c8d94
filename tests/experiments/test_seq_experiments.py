"""The supervised experiments: reading validation histories (hand-computed cases), memory_reach
and seq_variants end to end with --quick (tiny runs), run again without retraining, and bad
command lines refused naming the value."""

import json
import sys

import pytest

from agents.config.config_cli import parse_core_options
from experiments import ffattn_diagnostics, long_sequences, memory_reach, seq_variants
from experiments.frame.seq_history import aucc, seconds_to_reach, time_curve, value_at

HISTORY = [  # validations at updates 10, 20, 30, after 1, 3 and 4 training seconds
    {"update": 10, "seconds": 1.0, "accuracy": 0.2},
    {"update": 20, "seconds": 3.0, "accuracy": 0.6},
    {"update": 30, "seconds": 4.0, "accuracy": 0.5},
]


def test_a_history_is_a_step_function_of_updates_and_seconds():
    assert value_at(HISTORY, "accuracy", update=5) == 0.0  # before the first validation
    assert value_at(HISTORY, "accuracy", update=25) == 0.6
    assert value_at(HISTORY, "accuracy", seconds=3.0) == 0.6
    assert value_at(HISTORY, "accuracy") == 0.5  # the last
    assert time_curve(HISTORY, "accuracy", [0.5, 1.0, 3.5, 10.0]).tolist() == [0.0, 0.2, 0.6, 0.5]
    assert seconds_to_reach(HISTORY, "accuracy", 0.5) == 3.0
    assert seconds_to_reach(HISTORY, "accuracy", 0.7) is None


def test_aucc_is_the_mean_metric_over_time_up_to_the_horizon():
    # 0 until 1 s, 0.2 until 3 s, 0.6 until 4 s, 0.5 until 5 s: (0.4 + 0.6 + 0.5) / 5
    assert aucc(HISTORY, "accuracy", 5.0) == pytest.approx(0.3, rel=1e-12)
    assert aucc(HISTORY, "accuracy", 2.0) == pytest.approx(0.1, rel=1e-12)  # the horizon cuts the curve
    assert aucc([{"update": 1, "seconds": 0.0, "accuracy": 1.0}], "accuracy", 7.0) == 1.0
    with pytest.raises(ValueError, match="horizon must be > 0 seconds, got 0"):
        aucc(HISTORY, "accuracy", 0)


def run_main(module, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [module.__name__] + argv)
    module.main(argv)


def test_memory_reach_quick_writes_its_table_json_and_figure(tmp_path, monkeypatch):
    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = ["--quick", "--tasks", "random_walk", "--spans", "1", "--seeds", "2",
            "--updates", "2", "--fast-factor", "2", "--no-estimate", "--runs-dir", str(runs), "--out", str(out), "--jobs", "2"]
    run_main(memory_reach, argv, monkeypatch)
    summary = json.loads((out / "memory_reach.json").read_text())
    walk = summary["tasks"]["random_walk"]["rows"]
    assert list(walk) == ["feedback span 1", "transformer span 1", "lstm"]
    assert walk["feedback span 1"]["reach"] == 2 and walk["lstm"]["reach"] is None
    for row in walk.values():
        for run in row["per_seed"]:
            assert run["updates"] == (2 if row["core"] == "feedback" else 4)  # the fast factor
            history = {update: accuracy for update, _, accuracy in run["history"]}
            assert run["at_equal_updates"] == history[2]  # the validation at the feedback's last update
        values = [run["test"] for run in row["per_seed"]]
        assert min(values) <= row["test"]["iqm"] <= max(values)
    assert "| random_walk (accuracy) | transformer span 1 | 2 |" in (out / "memory_reach.md").read_text()
    assert (out / "memory_reach.png").stat().st_size > 0

    written = (runs / "random_walk" / "lstm" / "seed0" / "checkpoint.pt").stat().st_mtime_ns
    run_main(memory_reach, argv, monkeypatch)  # every run has its record: nothing trains again
    assert (runs / "random_walk" / "lstm" / "seed0" / "checkpoint.pt").stat().st_mtime_ns == written
    assert json.loads((out / "memory_reach.json").read_text())["tasks"] == summary["tasks"]


def test_memory_reach_runs_the_feedback_carry_as_the_feedback_core_with_its_gate_and_budget(tmp_path, monkeypatch):
    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = ["--quick", "--tasks", "random_walk", "--spans", "1", "--seeds", "2", "--cores", "feedback-carry", "transformer",
            "--updates", "2", "--fast-factor", "2", "--no-estimate", "--runs-dir", str(runs), "--out", str(out), "--jobs", "2"]
    run_main(memory_reach, argv, monkeypatch)
    walk = json.loads((out / "memory_reach.json").read_text())["tasks"]["random_walk"]["rows"]
    assert list(walk) == ["feedback-carry span 1", "transformer span 1"] and walk["feedback-carry span 1"]["reach"] == 2
    assert [run["updates"] for run in walk["feedback-carry span 1"]["per_seed"]] == [2, 2]  # the Feedback core's budget
    config = json.loads((runs / "random_walk" / "feedback-carry-span1" / "seed1" / "config.json").read_text())
    assert config["config"]["core"] == "feedback" and config["core_options"]["carry"] == "gate"


@pytest.mark.parametrize("variant, options", [("feedback-carry", {"carry": "gate"}), ("feedback-kept", {"keep_slot": True}),
                                              ("feedback-tanh", {"memory_write": "tanh", "read_norm": False, "value_init": "orthogonal"})])
def test_memory_reach_trains_each_feedback_variant_as_the_feedback_core_with_its_option(variant, options):
    """A variant's runs are the Feedback core's at the same sizes and budget, with its keeping option
    and nothing else changed (the paper's model is the row beside it)."""
    args = memory_reach.make_parser().parse_args(["--cores", "feedback", variant])
    memory_reach.resolve_defaults(args)
    paper, flags = (memory_reach.seq_args(args, "random_walk", core, 1, seed=3) for core in ("feedback", variant))
    assert flags[:len(paper)] == paper and flags[len(paper):-1] == ["--core-opt"]
    assert parse_core_options("feedback", [flags[-1]]) == options
    assert memory_reach.budget(args, variant) == memory_reach.budget(args, "feedback")


def test_seq_variants_quick_compares_variants_over_time(tmp_path, monkeypatch):
    out = tmp_path / "out"
    argv = ["persistent", "--quick", "--seeds", "2", "--updates", "4", "--no-estimate", "--runs-dir", str(tmp_path / "runs"),
            "--out", str(out), "--jobs", "2", "--name", "smoke"]
    run_main(seq_variants, argv, monkeypatch)
    summary = json.loads((out / "smoke.json").read_text())
    variants = summary["variants"]
    assert len(variants) == 3
    standard, all_attention = variants["transformer (FF 4d)"], variants[list(variants)[1]]
    assert all_attention["parameters"]["trained"] < standard["parameters"]["trained"]  # quick: N = 4, no feed-forward
    horizon = summary["horizon_seconds"]
    runs = [run for row in variants.values() for run in row["per_seed"]]
    assert horizon == pytest.approx(min(run["history"][-1]["seconds"] for run in runs), abs=1e-3)
    assert all(0.0 <= run["aucc"] <= 1.0 and run["updates"] == 4 for run in runs)
    assert (out / "smoke.png").stat().st_size > 0 and "| transformer (FF 4d) |" in (out / "smoke.md").read_text()


@pytest.mark.parametrize("argv, message", [
    (["persistent", "--level", "1.5"], "--level must be in"),
    (["nonsense"], "invalid choice: 'nonsense'"),
])
def test_seq_variants_refuses_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        seq_variants.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("experiment, argv, message", [
    (memory_reach, ["--spans", "0"], "argument --spans: must be an integer >= 1, got 0"),
    (memory_reach, ["--spans", "4", "1", "4"], "argument --spans: 4 is given twice; give each once"),
    (memory_reach, ["--cores", "mlp"], "argument --cores: invalid choice: 'mlp'"),
    (memory_reach, ["--cores", "lstm", "lstm"], "argument --cores: 'lstm' is given twice; give each once"),
    (long_sequences, ["--lengths", "ten"], "argument --lengths: must be an integer >= 1, got 'ten'"),
    (long_sequences, ["--lengths", "100", "100"], "argument --lengths: 100 is given twice; give each once"),
    (ffattn_diagnostics, ["--lengths", "-3"], "argument --lengths: must be an integer >= 1, got -3"),
    (ffattn_diagnostics, ["--lengths", "100", "100"], "argument --lengths: 100 is given twice; give each once"),
])
def test_bad_experiment_lists_exit_2_naming_the_value(experiment, argv, message, capsys):
    """Each value of a list flag names runs or rows of their own; one given twice would repeat a
    table row (or, for runs, collapse silently), so it is refused like a value not allowed.
    Parsing only: a bad value that slipped through would start the experiment."""
    with pytest.raises(SystemExit) as exit_info:
        experiment.make_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_long_sequences_quick_reports_epochs_to_solve_and_caps_long_training_sets(tmp_path, monkeypatch):
    assert long_sequences.train_sequences(10_000, 100) == 10_000
    assert long_sequences.train_sequences(10_000, 10_000) == long_sequences.MAX_TRAIN_VALUES // 10_000
    out = tmp_path / "out"
    argv = ["--quick", "--problems", "xor", "--lengths", "20", "--settings", "variable", "--models", "ffattn", "lstm",
            "--lstm-max-length", "10", "--epochs", "2", "--epoch-updates", "2", "--seeds", "2", "--no-estimate",
            "--runs-dir", str(tmp_path / "runs"), "--out", str(out)]
    run_main(long_sequences, argv, monkeypatch)
    summary = json.loads((out / "long_sequences.json").read_text())
    assert [(c["model"], c["setting"], c["length"]) for c in summary["cells"]] == [("ffattn", "variable", 20)]  # no LSTM past 10
    cell = summary["cells"][0]
    assert all(run["updates"] == 4 or run["epochs_to_solve"] is not None for run in cell["per_seed"])
    assert cell["solved"] == sum(run["epochs_to_solve"] is not None for run in cell["per_seed"])
    assert "| xor | 20 .. 22 | ffattn | " in (out / "long_sequences.md").read_text()
    fewer = [*argv[: argv.index("--epochs") + 1], "1", *argv[argv.index("--epochs") + 2 :]]
    with pytest.raises(SystemExit, match="already trained to 4 updates, more than the 2 asked for; give another --runs-dir"):
        run_main(long_sequences, fewer, monkeypatch)  # a finished run is not taken back to a smaller budget (as train_job refuses)


def test_memory_reach_paper_preset_runs_table_1s_sizes():
    args = memory_reach.make_parser().parse_args(["--preset", "paper"])
    memory_reach.resolve_defaults(args)
    assert (args.spans, args.task_span, args.updates, args.fast_factor, args.name) == ([100], 100, 100_000, 1, "paper_memory_reach")
    flags = memory_reach.seq_args(args, "random_walk", "transformer", 100, seed=2)
    values = dict(zip(flags[::2], flags[1::2]))
    assert values["--preset"] == "paper" and values["--span"] == "100" and values["--seed"] == "2"
    assert (values["--grid-size"], values["--walk-length"]) == ("8", "100")
    assert "--d-model" not in values  # the paper preset's d 256, 4 layers


def test_long_sequences_table_puts_the_papers_numbers_beside_ours():
    interval = {"iqm": 1.0, "ci_low": 1.0, "ci_high": 1.0}

    def cell(problem, setting, length, model, epochs):
        runs = [{"seed": seed, "epochs_to_solve": e} for seed, e in enumerate(epochs)]
        return {"problem": problem, "setting": setting, "length": length, "model": model, "per_seed": runs,
                "solved": sum(e is not None for e in epochs), "paper": long_sequences.PAPER_EPOCHS.get((problem, model), {}).get(length),
                "test": interval, "seconds_per_update": interval}

    summary = {"epochs": 5, "epoch_updates": 1000, "seeds": 3, "cells": [
        cell("adding", "variable", 1000, "mean", [2, 3, None]),
        cell("multiplication", "fixed", 5000, "mean", [None, None, None]),
        cell("xor", "fixed", 100, "ffattn", [1, 1, 1]),
    ]}
    rows = long_sequences.table(summary).splitlines()[-3:]
    assert rows[0].startswith("| adding | 1,000 .. 1,100 | mean | 2/3 | 2, 3, - | 2 |")  # Table 1: the mean at T0 = 1,000, 2 epochs
    assert rows[1].startswith("| multiplication | 5,000 | mean | 0/3 | -, -, - | 89.8% |")  # not solved in 100 epochs there
    assert rows[2].startswith("| xor | 100 | ffattn | 3/3 | 1, 1, 1 | - |")  # XOR is not in the published paper
