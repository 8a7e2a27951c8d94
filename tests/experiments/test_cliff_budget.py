"""experiments/cliff_budget.py: a sweep's models run again at their first failing length, with
the sweep's flags and more frames."""

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from experiments import cliff_budget, memory_length


def model(solved_of_five: dict[int, int]) -> dict:
    return {"lengths": {str(length): {"solved": {"solved": solved, "runs": 5}} for length, solved in solved_of_five.items()}}


def test_the_first_failing_length_is_the_first_that_most_seeds_do_not_solve():
    assert cliff_budget.first_failing(model({16: 5, 8: 5, 32: 2, 64: 0})) == 32  # lengths in order, whatever the JSON's
    assert cliff_budget.first_failing(model({8: 3, 16: 1, 32: 4})) == 16  # 3 of 5 is most; 2 of 5 is not
    assert cliff_budget.first_failing(model({8: 5, 16: 5})) is None


@pytest.mark.parametrize("budget, scaled", [
    ("--budget bsuite", "--budget bsuite --frame-scale 4"),
    ("--frames 50000", "--frames 200000"),
    ("--frame-scale 0.5", "--frame-scale 2"),  # Ni et al.'s schedule, already scaled
])
def test_longer_runs_repeat_the_sweeps_task_learner_and_flags_with_scale_times_the_frames(budget, scaled):
    common = "--env memory_length --algo ppo --num-minibatches 2 --rollout 16 --train-args '--learning-rate 1e-3'"
    command = f"python -m experiments.memory_length {common} {budget} --lengths 8 16 --models lstm gru --seeds 5 --stop-after 2 --jobs 2"
    longer = memory_length.make_parser().parse_args(cliff_budget.sweep_flags(command, 4.0))
    expected = memory_length.make_parser().parse_args(shlex.split(f"{common} {scaled}"))
    assert vars(longer) == vars(expected)
    sweep = memory_length.make_parser().parse_args(shlex.split(f"{common} {budget}"))
    assert memory_length.frames_at(longer, 16) == 4 * memory_length.frames_at(sweep, 16)


def test_a_quick_budget_check_runs_each_cliff_and_leaves_out_the_floor_and_the_models_without_one(tmp_path, monkeypatch):
    runs = lambda solved: {"solved": {"solved": solved, "runs": 2}, "per_seed": [{"greedy_success": 1.0 if s < solved else 0.5} for s in range(2)]}  # noqa: E731
    sweep = {"command": "python -m experiments.memory_length --env memory_length --budget bsuite --lengths 2 3 --models lstm gru mlp --seeds 2",
             "frames": {"2": 30_000, "3": 40_000},
             "models": {"lstm": {"lengths": {"2": runs(2), "3": runs(0)}}, "gru": {"lengths": {"2": runs(2), "3": runs(2)}},
                        "mlp": {"lengths": {"2": runs(0), "3": runs(0)}}}}
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps(sweep))
    argv = ["--name", "sweep", "--out", str(out), "--runs-dir", str(tmp_path / "runs"), "--seeds", "2", "--jobs", "2", "--quick"]
    monkeypatch.setattr(sys, "argv", ["cliff_budget", *argv])
    cliff_budget.main(argv)
    result = json.loads((out / "sweep_budget.json").read_text())
    assert list(result["models"]) == ["lstm"] and result["complete"]  # gru solved every length; the MLP is the floor
    cell = result["models"]["lstm"]
    assert (cell["length"], cell["sweep_frames"], cell["sweep_greedy_per_seed"]) == (3, 40_000, [0.5, 0.5])
    assert [run["seed"] for run in cell["per_seed"]] == [0, 1] and (tmp_path / "runs" / "lstm" / "L3" / "seed1" / "train.done.json").exists()
    assert "| lstm | 3 | 40,000 | 0 of 2 |" in (out / "sweep_budget.md").read_text()
    shutil.rmtree(tmp_path / "runs")  # another machine: the committed ledger, no run folders
    cliff_budget.main(argv)
    assert json.loads((out / "sweep_budget.json").read_text())["models"] == result["models"]
    assert not (tmp_path / "runs" / "lstm").exists()  # nothing trained again
    with pytest.raises(SystemExit):  # a model that has no cliff asked for by name
        cliff_budget.main([*argv, "--models", "gru"])


def test_a_check_stopped_after_one_model_keeps_that_model_and_says_it_is_under_way(tmp_path, monkeypatch):
    """Each model's longer runs are written as soon as they are done: a check stopped (Ctrl-C,
    SIGTERM) during the second model leaves the first in NAME_budget.json, "complete" false."""
    failing = lambda: {"solved": {"solved": 0, "runs": 2}, "per_seed": [{"greedy_success": 0.5}] * 2}  # noqa: E731
    sweep = {"command": "python -m experiments.memory_length --env memory_length --budget bsuite --lengths 2 --models lstm gru --seeds 2",
             "frames": {"2": 30_000}, "models": {"lstm": {"lengths": {"2": failing()}}, "gru": {"lengths": {"2": failing()}}}}
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps(sweep))

    def longer_runs(argv):  # memory_length.main as the check calls it: lstm finishes, gru is stopped
        flags = dict(zip(argv, argv[1:]))
        if flags["--models"] == "gru":
            raise KeyboardInterrupt
        cell = {"train_args": ["--core", "lstm"], "per_seed": [{"seed": s, "greedy_success": 1.0, "training_seconds": 60.0} for s in range(2)],
                "greedy": {"iqm": 1.0}, "solved": {"solved": 2, "runs": 2}}
        Path(flags["--out"]).mkdir(parents=True, exist_ok=True)
        (Path(flags["--out"]) / "lstm.json").write_text(json.dumps({"machine": "here", "frames": {"2": 120_000}, "models": {"lstm": {"lengths": {"2": cell}}}}))

    monkeypatch.setattr(cliff_budget.memory_length, "main", longer_runs)
    with pytest.raises(KeyboardInterrupt):
        cliff_budget.main(["--name", "sweep", "--out", str(out), "--runs-dir", str(tmp_path / "runs"), "--seeds", "2"])
    result = json.loads((out / "sweep_budget.json").read_text())
    assert list(result["models"]) == ["lstm"] and result["complete"] is False
    assert result["models"]["lstm"]["frames"] == 120_000 and result["models"]["lstm"]["solved"]["solved"] == 2
    assert "Under way: the models done so far." in (out / "sweep_budget.md").read_text()
