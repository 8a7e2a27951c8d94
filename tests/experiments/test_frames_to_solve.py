"""The frames-to-solve sweep (experiments/frames_to_solve.py), its runs tried at other lengths
(experiments/past_length.py) and its answer (experiments/frames_to_solve_answer.py)."""

import json
import shlex
import shutil
import sys

import numpy as np
import pytest

from agents.learners.solve import RECORD
from experiments import frames_to_solve, frames_to_solve_answer, memory_length, past_length
from experiments.frame.train_flags import check_train_flags


def test_the_cap_is_40000_episodes_to_256_then_12m_frames_then_four_times_the_median_at_half():
    assert [frames_to_solve.cap_frames(length) for length in (1, 64, 256)] == [80_000, 2_600_000, 10_280_000]
    assert frames_to_solve.cap_frames(512) == frames_to_solve.cap_frames(1024) == 12_000_000
    assert frames_to_solve.cap_frames(2048, [3e6, 5e6, np.inf]) == 20_000_000  # the median, a censored run above every solved one
    with pytest.raises(ValueError, match="L = 2048: its cap is 4x the median frames to solve L = 1024"):
        frames_to_solve.cap_frames(2048, [3e6, np.inf, np.inf])
    with pytest.raises(ValueError, match="has not measured"):
        frames_to_solve.cap_frames(4096)


def test_the_default_sweep_runs_every_core_gtrxl_and_mamba_among_them_and_no_feedback_option():
    models = frames_to_solve.make_parser().parse_args([]).models
    assert {"transformer-episode-gtrxl", "mamba", "ffm", "lru", "mlp", "feedback-span16"} <= set(models)
    assert not [name for name in models if name.startswith("feedback-span16-")]


def test_dqn_runs_take_the_memory_length_runners_dqn_settings_and_no_gradient_window():
    """--algo dqn: train_dqn.py's flags (its replay reaches the episode's start; --bptt it refuses)
    that its own parser accepts, the same solve check."""
    parser = frames_to_solve.make_parser()
    args = parser.parse_args(["--algo", "dqn", "--models", "lstm-chrono"])
    args.fewer_seeds = (frames_to_solve.FEWER_FROM, 3)
    train_args = frames_to_solve.Sweep(args, None, None, []).train_args("lstm-chrono", 16, 0)
    assert "--bptt" not in train_args and train_args[train_args.index("--rollout") + 1] == str(memory_length.DQN_ROLLOUT)
    assert " ".join(memory_length.DQN_ARGS) in " ".join(train_args) and "--solve-at" in train_args
    check_train_flags(parser, "dqn", train_args)  # exits 2 where train_dqn.py would refuse them


def test_past_length_tries_half_and_two_four_eight_times_the_length():
    assert past_length.tried_lengths(1) == [2, 4, 8]
    assert past_length.tried_lengths(64) == [32, 128, 256, 512]
    assert past_length.tried_lengths(3) == [6, 12, 24]


def synthetic(slope, cap, seed=0, seeds=5):
    """{L: [(frames, solved)]} of runs whose frames grow as L ** slope, censored at `cap`."""
    generator = np.random.default_rng(seed)
    runs = {}
    for length in (1, 2, 4, 8, 16, 32):
        frames = 1e4 * length**slope * 10 ** generator.normal(0, 0.1, seeds)
        runs[length] = [(min(f, cap), f < cap) for f in frames]
    return runs


def test_the_slope_takes_censored_runs_as_lower_bounds_not_as_solved_at_the_cap():
    runs = synthetic(1.5, cap=1.5e6, seeds=8)  # at L = 32 the runs' frames are about 1.8M: most censored, some not
    assert 0 < sum(not done for _, done in runs[32]) < 8
    fit = frames_to_solve_answer.slope(runs)
    assert fit["ci_low"] < 1.5 < fit["ci_high"] and abs(fit["slope"] - 1.5) < 0.1
    x, y = zip(*[(np.log10(length), np.log10(frames)) for length, cell in runs.items() for frames, _ in cell])
    naive = np.polyfit(x, y, 1)[0]  # the censored runs read as solved at the cap pull the slope down
    assert naive < fit["slope"] - 0.02


def test_a_slope_needs_two_solved_lengths():
    runs = {1: [(1e4, True)] * 3, 2: [(1e6, False)] * 3}
    assert frames_to_solve_answer.slope(runs) is None
    assert frames_to_solve_answer.median_frames([(1e4, True), (2e4, True), (1e6, False)]) == 2e4
    assert frames_to_solve_answer.median_frames([(1e4, True), (1e6, False), (1e6, False)]) is None


def test_the_answer_says_where_a_curve_stops_with_the_probes_there(tmp_path):
    """At the first length most seeds did not solve, the answer takes the probes of the sweep's
    runs there (recall_cliff.py's NAME_probes.json): the gradient to the bit and the retention,
    fresh -> trained; "not probed" where the file lacks that length, "-" where nothing stopped."""
    def run(seed: int, solved: bool) -> dict:
        return {"seed": seed, "solved": solved, "frames_to_solve": 1e4 * (seed + 1) if solved else None,
                "censored_at": None if solved else 1e6, "success_at_length": {"2": 1.0, "4": 0.5} if solved else None}

    stops = {"1": {"per_seed": [run(0, True), run(1, True), run(2, False)]}, "2": {"per_seed": [run(0, False), run(1, False), run(2, False)]}}
    sweep = {"complete": False, "models": {"fades": {"lengths": stops}, "unprobed": {"lengths": stops},
                                           "holds": {"lengths": {"1": stops["1"]}}}}
    medians = {"fresh": {"gradient_to_cue": 1e-3, "cue_separation": 0.1, "retention": 0.88},
               "trained": {"gradient_to_cue": 4e-7, "cue_separation": 1e-4, "retention": 0.80}}
    probes = {"models": {"fades": {"1": {"per_seed": [], "median": medians}, "2": {"per_seed": [], "median": medians}}}}
    (tmp_path / "frames_to_solve.json").write_text(json.dumps(sweep))
    (tmp_path / "frames_to_solve_probes.json").write_text(json.dumps(probes))
    frames_to_solve_answer.main(["--out", str(tmp_path)])
    answer = json.loads((tmp_path / "frames_to_solve_answer.json").read_text())
    rows = answer["models"]["a2c"]
    assert rows["fades"]["first_unsolved"] == 2 and rows["fades"]["probes_there"]["trained"] == medians["trained"]
    assert rows["unprobed"]["probes_there"] is None and rows["holds"]["first_unsolved"] is None
    assert answer["probes"] == {"a2c": "frames_to_solve_probes.json"}
    text = (tmp_path / "frames_to_solve_answer.md").read_text()
    assert "| A2C | fades | 1 |" in text and text.count("1e-03 -> 4e-07; 0.88 -> 0.80") == 1
    assert "| 2 | not probed |" in text and "| - | - |" in text


def test_a_row_whose_runs_are_unchanged_keeps_its_slope_and_one_with_a_new_run_is_refitted(tmp_path, monkeypatch):
    """The answer's JSON keeps each row's runs; called again, a row with the same runs takes the
    written slope (planted here, so only reuse can give it back), a row with a run more is refitted,
    and --refit refits every row."""
    monkeypatch.setattr(frames_to_solve_answer, "RESAMPLES", 50)  # reuse does not depend on how many
    def cell(frames: list[float]) -> dict:
        return {"per_seed": [{"seed": seed, "solved": True, "frames_to_solve": f, "censored_at": None, "success_at_length": None}
                             for seed, f in enumerate(frames)]}

    lengths = {"1": cell([1e4, 2e4, 3e4]), "2": cell([4e4, 5e4, 6e4]), "4": cell([1e5, 2e5, 3e5])}
    sweep = {"complete": False, "models": {"same": {"lengths": lengths}, "grown": {"lengths": dict(lengths)}}}
    (tmp_path / "frames_to_solve.json").write_text(json.dumps(sweep))
    frames_to_solve_answer.main(["--out", str(tmp_path)])
    path = tmp_path / "frames_to_solve_answer.json"
    written = json.loads(path.read_text())
    fitted = written["models"]["a2c"]["same"]["slope"]
    assert written["models"]["a2c"]["same"]["runs"]["2"] == [[4e4, True], [5e4, True], [6e4, True]]
    planted = {**fitted, "slope": 9.99}
    for name in ("same", "grown"):
        written["models"]["a2c"][name]["slope"] = planted
    path.write_text(json.dumps(written))
    sweep["models"]["grown"]["lengths"]["8"] = cell([6e5, 7e5, 8e5])
    (tmp_path / "frames_to_solve.json").write_text(json.dumps(sweep))
    frames_to_solve_answer.main(["--out", str(tmp_path)])
    rows = json.loads(path.read_text())["models"]["a2c"]
    assert rows["same"]["slope"] == planted
    assert rows["grown"]["slope"]["slope"] != 9.99 and rows["grown"]["slope"]["lengths"] == [1, 2, 4, 8]
    frames_to_solve_answer.main(["--out", str(tmp_path), "--refit"])
    assert json.loads(path.read_text())["models"]["a2c"]["same"]["slope"] == fitted
    monkeypatch.setattr(frames_to_solve_answer, "RESAMPLES", 60)  # an answer fitted otherwise is refitted
    written = json.loads(path.read_text())
    written["models"]["a2c"]["same"]["slope"] = planted
    path.write_text(json.dumps(written))
    frames_to_solve_answer.main(["--out", str(tmp_path)])
    assert json.loads(path.read_text())["models"]["a2c"]["same"]["slope"]["resamples"] == 60


def test_a_quick_sweep_records_each_runs_cost_and_resumes_from_its_ledger(tmp_path):
    out, runs = tmp_path / "out", tmp_path / "runs"
    argv = ["--quick", "--lengths", "1", "2", "--models", "gru", "mlp", "--seeds", "2", "--runs-dir", str(runs), "--out", str(out), "--jobs", "2"]
    frames_to_solve.main(argv)
    summary = json.loads((out / "frames_to_solve.json").read_text())
    assert summary["complete"] and summary["task"] == "memory_length, show_time=False" and list(summary["models"]) == ["gru", "mlp"]
    config = json.loads((runs / "gru" / "L2" / "seed1" / "config.json").read_text())
    assert config["env_options"] == {"length": 2, "show_time": False} and config["solve_at"] == 0.95 and config["bptt"] == "episode"
    for model in summary["models"].values():
        for cell in model["lengths"].values():
            assert cell["cap_frames"] == frames_to_solve.QUICK_FRAMES and len(cell["per_seed"]) == 2
            for run in cell["per_seed"]:
                assert run["solved"] == (run["frames_to_solve"] is not None) == (run["censored_at"] is None)
                assert run["checks"] and run["checks"][-1]["frames"] <= frames_to_solve.QUICK_FRAMES
                assert (run["success_at_length"] is not None) == run["solved"]  # tried past its length only when solved
    assert all(not run["solved"] for cell in summary["models"]["mlp"]["lengths"].values() for run in cell["per_seed"])

    # A run trained but not tried past its length (a failed try, a stopped sweep) is tried when the sweep runs again.
    ledger_path = out / "frames_to_solve_runs.json"
    ledger = json.loads(ledger_path.read_text())
    del ledger["gru/L1/seed0"]["past_length.done.json"]
    ledger_path.write_text(json.dumps(ledger))
    (runs / "gru" / "L1" / "seed0" / "past_length.done.json").unlink()
    frames_to_solve.main(argv)
    assert "past_length.done.json" in json.loads(ledger_path.read_text())["gru/L1/seed0"]
    assert json.loads((out / "frames_to_solve.json").read_text())["models"] == summary["models"]

    # A resumed sweep that has not reached L = 2 again yet (here: told to run L = 1 only) keeps L = 2's cells as they were written.
    resumed = list(argv)
    del resumed[argv.index("--lengths") + 2]  # --lengths 1
    frames_to_solve.main(resumed)
    assert json.loads((out / "frames_to_solve.json").read_text())["models"] == summary["models"]

    # A call with fewer models (one core run ahead) adds to the file: the others' cells, stops and commands stay.
    written = json.loads((out / "frames_to_solve.json").read_text())
    (out / "frames_to_solve.json").write_text(json.dumps({**written, "stopped": {"mlp": 2}}))
    narrow = [*argv[:argv.index("--models") + 1], "gru", *argv[argv.index("--models") + 3:]]
    frames_to_solve.main(narrow)
    after = json.loads((out / "frames_to_solve.json").read_text())
    assert after["models"] == summary["models"] and after["stopped"] == {"mlp": 2} and not after["complete"] and after["lengths"] == [1, 2]
    command = {name: "python -m experiments.frames_to_solve " + shlex.join(call) for name, call in (("full", argv), ("resumed", resumed), ("narrow", narrow))}
    assert after["command"] == command["narrow"]
    assert after["commands"] == [command["full"], command["resumed"], command["narrow"]]  # each call once, however often it ran
    frames_to_solve.main(argv)  # every model again: the file's stops are this call's, and it is complete
    after = json.loads((out / "frames_to_solve.json").read_text())
    assert after["stopped"] == {} and after["complete"] and after["commands"] == [command["resumed"], command["narrow"], command["full"]]

    shutil.rmtree(runs)  # another machine: the ledger alone
    frames_to_solve.main(argv)
    assert not runs.exists()
    assert json.loads((out / "frames_to_solve.json").read_text())["models"] == summary["models"]

    frames_to_solve_answer.main(["--out", str(out)])
    answer = json.loads((out / "frames_to_solve_answer.json").read_text())
    assert answer["models"]["a2c"]["mlp"]["longest_solved"] is None and (out / "frames_to_solve_answer.png").stat().st_size > 0


def test_past_length_refuses_a_run_trained_with_the_clock(tmp_path, capsys):
    import train_a2c

    train_a2c.main(["--env", "memory_length", "--env-opt", "length=2", "--core", "mlp", "--core-opt", "hidden_size=8", "--num-envs", "2",
                    "--rollout", "4", "--total-steps", "8", "--threads", "1", "--run-dir", str(tmp_path / "run")])
    with pytest.raises(SystemExit) as exit_info:
        past_length.main([str(tmp_path / "run")])
    assert exit_info.value.code == 2 and "show_time=True" in capsys.readouterr().err


def test_past_length_tries_the_lengths_asked_for(tmp_path, capsys):
    """--lengths replaces L/2, 2L, 4L, 8L (a policy that answers at L and 8L but not between is
    told apart only by the lengths between)."""
    import train_a2c

    run = tmp_path / "run"
    train_a2c.main(["--env", "memory_length", "--env-opt", "length=2,show_time=false", "--core", "mlp", "--core-opt", "hidden_size=8",
                    "--num-envs", "2", "--rollout", "4", "--total-steps", "8", "--threads", "1", "--run-dir", str(run)])
    (run / RECORD).write_text(json.dumps({"solved": True}))  # as if its criterion had been met
    capsys.readouterr()
    past_length.main([str(run), "--lengths", "3", "5", "--episodes", "2"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["trained_length"] == 2 and list(result["success"]) == ["3", "5"]
    assert all(value in (0.0, 0.5, 1.0) for value in result["success"].values())  # 2 episodes each
