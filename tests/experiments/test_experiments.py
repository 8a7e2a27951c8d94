"""The experiment machinery: statistics against hand-computed cases, a whole experiment (--quick:
tiny runs) end to end, run again to show that finished runs are not repeated, and bad command
lines refused naming the value."""

import json
import shutil
import sys

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from agents.config.config_cli import parse_core_options
from agents.cores import CORES
from experiments import corridor_span, head_init, mazes
from experiments.frame.curves import binned_curve
from experiments.frame import stats
from experiments.frame.stats import iqm_interval, solved_interval, trimmed_mean
from tests.experiments.cue_bounds import MEMORY_ABOVE, NO_MEMORY_BELOW


def test_iqm_is_the_mean_of_the_middle_half_and_its_interval_brackets_it():
    scores = {"a": np.array([0.0, 1.0, 2.0, 100.0]), "b": np.array([5.0, 5.0, 5.0])}
    result = iqm_interval(scores)
    assert result["a"]["iqm"] == pytest.approx(1.5, rel=1e-12)  # float64: 0 and 100 trimmed, mean of 1 and 2
    assert 0.0 <= result["a"]["ci_low"] <= 1.5 <= result["a"]["ci_high"] <= 100.0
    assert result["b"] == {"iqm": 5.0, "ci_low": 5.0, "ci_high": 5.0}
    assert iqm_interval(scores) == result  # asked again in this process: the kept answer
    curves = iqm_interval({"c": np.arange(12.0).reshape(4, 3)})["c"]  # IQM per column over 4 runs
    assert curves["iqm"] == pytest.approx([4.5, 5.5, 6.5], rel=1e-12)
    with pytest.raises(ValueError, match=r"'d': need .* at least 2 runs, got shape \(1,\)"):
        iqm_interval({"d": np.array([1.0])})


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=12),
              elements=st.floats(-1e6, 1e6) | st.just(np.nan)))
def test_the_bootstraps_trimmed_mean_is_scipys(x):
    """The statistic the bootstrap calls is scipy's 25% trimmed mean (rliable's aggregate_iqm),
    column by column, NaN included, written out for speed."""
    expected = scipy.stats.trim_mean(x, proportiontocut=0.25, axis=0)
    np.testing.assert_allclose(trimmed_mean(x), expected, rtol=4 * np.finfo(np.float64).eps, atol=0, equal_nan=True)


def test_the_bootstrap_is_seeded_and_leaves_numpy_s_global_generator_as_it_found_it():
    """rliable 1.2 resamples with numpy's global generator whatever random_state it is given: the
    same scores computed afresh (nothing kept) give the same interval, and a caller's draws from
    that generator go on as if no bootstrap had run."""
    scores = {"a": np.array([0.42, 0.5, 0.58, 0.44, 0.53])}
    np.random.seed(7)
    expected_next = np.random.random_sample(3)
    np.random.seed(7)
    first = iqm_interval(scores, seed=3)
    assert np.array_equal(np.random.random_sample(3), expected_next)
    stats._KNOWN.clear()
    np.random.seed(11)  # another global state: the interval must not depend on it
    assert iqm_interval(scores, seed=3) == first
    stats._KNOWN.clear()
    assert iqm_interval(scores, seed=4) != first  # the seed is what picks the resamples


def test_an_interval_asked_again_is_the_kept_answer_and_a_copy():
    scores = {"a": np.array([0.3, 0.9, 0.1, 0.5, 0.7]), "b": np.arange(8.0).reshape(4, 2)}
    first = iqm_interval(scores)
    first["a"]["iqm"] = -1.0
    first["b"]["ci_low"].append(99.0)  # a caller changing its answer does not change the next one
    again = iqm_interval(scores)
    assert again["a"]["iqm"] == pytest.approx(0.5, rel=1e-12) and len(again["b"]["ci_low"]) == 2
    assert iqm_interval({"a": np.array([0.3, 0.9, 0.1, 0.5, 0.71])})["a"]["iqm"] != again["a"]["iqm"]  # other scores, other answer


def test_the_solved_probability_counts_runs_at_the_threshold_with_a_wilson_interval():
    """3 of 10 runs at or above 0.95: p = 0.3, Wilson 95% interval [0.108, 0.603] (from the
    formula: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z = 1.96)."""
    successes = np.array([1.0, 0.95, 0.999, 0.94, 0.5, 0.49, 0.0, 0.5, 0.5, 0.5])
    result = solved_interval(successes, 0.95)
    assert (result["solved"], result["runs"]) == (3, 10)
    assert result["ci_low"] == pytest.approx(0.1078, abs=1e-4) and result["ci_high"] == pytest.approx(0.6032, abs=1e-4)
    none = solved_interval(np.zeros(10), 0.95)
    assert none["solved"] == 0 and none["ci_low"] == 0.0 and none["ci_high"] == pytest.approx(0.2775, abs=1e-4)


def test_a_quick_experiment_writes_its_table_json_and_figures_and_resumes(tmp_path, capsys, monkeypatch):
    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = ["--quick", "--envs", "corridor", "--cores", "lstm", "--seeds", "2", "--frames", "2048",
            "--name", "smoke", "--runs-dir", str(runs), "--out", str(out), "--jobs", "2"]
    monkeypatch.setattr(sys, "argv", ["mazes"] + argv)
    mazes.main(argv)
    summary = json.loads((out / "smoke.json").read_text())
    corridor = summary["envs"]["corridor"]
    per_seed = corridor["cores"]["lstm"]["per_seed"]
    assert [run["seed"] for run in per_seed] == [0, 1]
    returns = [run["eval"]["return"] for run in per_seed]
    stats = corridor["cores"]["lstm"]["eval_return"]
    assert min(returns) <= stats["ci_low"] <= stats["iqm"] <= stats["ci_high"] <= max(returns)
    assert corridor["oracle"]["return"] == 1.0 and corridor["random"]["return"] < 0.5
    assert all(run["training_seconds"] > 0 for run in per_seed)
    assert summary["command"].startswith("python -m experiments.mazes --quick")
    assert (out / "smoke_corridor.png").stat().st_size > 0
    assert "| corridor | lstm |" in (out / "smoke.md").read_text()
    # the LSTM as the published mazes ran it: torch's gate biases, not the core's default since
    config = json.loads((runs / "corridor" / "lstm" / "seed0" / "config.json").read_text())
    assert config["core_options"]["gate_init"] == "pytorch"

    # Run again: every job has its record, so nothing trains or evaluates again.
    checkpoint = runs / "corridor" / "lstm" / "seed0" / "checkpoint.pt"
    written = checkpoint.stat().st_mtime_ns
    mazes.main(argv)
    assert checkpoint.stat().st_mtime_ns == written
    assert json.loads((out / "smoke.json").read_text())["envs"] == summary["envs"]

    # A larger budget continues the finished runs from their checkpoints and evaluates them again.
    longer = [*argv[: argv.index("--frames") + 1], "3072", *argv[argv.index("--frames") + 2 :]]
    mazes.main(longer)
    assert checkpoint.stat().st_mtime_ns != written
    assert "resuming" in (runs / "corridor" / "lstm" / "seed0" / "train.log").read_text()
    assert json.loads((out / "smoke.json").read_text())["frames"] == 3072
    with pytest.raises(SystemExit, match="already trained to 3,072 frames, more than the 2,048 asked for"):
        mazes.main(argv)  # a run cannot be taken back to a smaller budget


def test_an_experiment_on_a_third_party_env_has_no_oracle_column(tmp_path, monkeypatch):
    pytest.importorskip("popgym")
    env = "popgym:popgym-RepeatPreviousEasy-v0"
    argv = ["--quick", "--envs", env, "--cores", "mlp", "--seeds", "2", "--frames", "512",
            "--name", "third", "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--jobs", "2"]
    monkeypatch.setattr(sys, "argv", ["mazes"] + argv)
    mazes.main(argv)
    result = json.loads((tmp_path / "out" / "third.json").read_text())["envs"][env]
    assert "oracle" not in result and -1.0 <= result["random"]["return"] <= 1.0  # POPGym returns lie in [-1, 1]
    for run in result["cores"]["mlp"]["per_seed"]:
        assert run["final_training_return"] <= run["best_training_return"]  # the best of the curve's bins
    row = next(line for line in (tmp_path / "out" / "third.md").read_text().splitlines() if line.startswith(f"| {env} | mlp |"))
    assert row.split(" | ")[-2] == "-"  # the oracle column
    assert (tmp_path / "out" / "third_popgym-popgym-RepeatPreviousEasy-v0.png").stat().st_size > 0
    assert (tmp_path / "runs" / "popgym-popgym-RepeatPreviousEasy-v0" / "mlp" / "seed1" / "checkpoint.pt").exists()


def test_a_curve_is_binned_by_frames_and_carried_over_empty_bins(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    for step, value in [(10, 1.0), (20, 3.0), (75, 5.0)]:
        writer.add_scalar("charts/episodic_return", value, step)
    writer.close()
    curve = binned_curve(tmp_path, "charts/episodic_return", frames=100, bins=4)  # bins of 25 frames
    np.testing.assert_array_equal(curve, [2.0, 2.0, 2.0, 5.0])
    assert np.isnan(binned_curve(tmp_path, "charts/success", frames=100, bins=2)).all()  # nothing logged yet


def test_a_quick_corridor_span_experiment_writes_its_table_json_and_figure(tmp_path, monkeypatch):
    from experiments import corridor_span

    out = tmp_path / "out"
    argv = ["--quick", "--spans", "1", "2", "--cores", "transformer", "--references", "mlp", "--seeds", "2", "--frames", "256",
            "--length", "3", "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--jobs", "2"]
    monkeypatch.setattr(sys, "argv", ["corridor_span"] + argv)
    corridor_span.main(argv)
    summary = json.loads((out / "corridor_span.json").read_text())
    assert sorted(summary["models"]) == ["mlp", "transformer/span1", "transformer/span2"]
    span2 = summary["models"]["transformer/span2"]
    assert (span2["span"], span2["reach"]) == (2, 4)
    successes = [run["success"] for run in span2["per_seed"]]
    assert all(0.0 <= s <= 1.0 for s in successes)
    assert min(successes) <= span2["success"]["iqm"] <= max(successes)
    # length 3: the doors are 2 steps from the cue, inside a span-2 transformer's reach, beyond an MLP's
    assert all(run["cue_separation"] > MEMORY_ABOVE for run in span2["per_seed"])
    assert all(run["cue_separation"] < NO_MEMORY_BELOW for run in summary["models"]["mlp"]["per_seed"])
    assert summary["previous_inputs"] is False
    config = json.loads((tmp_path / "runs" / "mlp" / "seed0" / "config.json").read_text())
    assert config["previous_inputs"] is False
    assert (out / "corridor_span.png").stat().st_size > 0
    assert "| transformer | 2 | 4 |" in (out / "corridor_span.md").read_text()
    solved = span2["solved"]
    assert solved["runs"] == 2 and solved["solved"] == sum(s >= corridor_span.SOLVED for s in successes)


def test_the_corridor_runs_gtrxl_as_the_gated_transformer_and_mamba_as_a_reference(tmp_path, monkeypatch):
    """--cores gtrxl trains the Transformer with gating=gru in a folder and row of its own (so a
    plain Transformer's runs are never resumed as GTrXL's), with the Transformer's reach; Mamba
    runs as a reference."""
    from experiments import corridor_span

    out = tmp_path / "out"
    argv = ["--quick", "--spans", "1", "--cores", "gtrxl", "--references", "mamba", "--seeds", "2", "--frames", "256",
            "--length", "3", "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--jobs", "2", "--eval-episodes", "2"]
    monkeypatch.setattr(sys, "argv", ["corridor_span"] + argv)
    corridor_span.main(argv)
    summary = json.loads((out / "corridor_span.json").read_text())
    assert sorted(summary["models"]) == ["gtrxl/span1", "mamba"]
    assert (summary["models"]["gtrxl/span1"]["span"], summary["models"]["gtrxl/span1"]["reach"]) == (1, 2)
    gated = json.loads((tmp_path / "runs" / "gtrxl" / "span1" / "seed0" / "config.json").read_text())
    assert (gated["core"], gated["core_options"]["gating"], gated["core_options"]["span"]) == ("transformer", "gru", 1)
    assert json.loads((tmp_path / "runs" / "mamba" / "seed1" / "config.json").read_text())["core"] == "mamba"
    assert "| gtrxl | 1 | 2 |" in (out / "corridor_span.md").read_text()


@pytest.mark.parametrize("variant, option", [("feedback-carry", "carry=gate"), ("feedback-kept", "keep_slot=True"),
                                             ("feedback-tanh", "memory_write=tanh,read_norm=False,value_init=orthogonal")])
def test_the_corridors_feedback_variant_rows_are_the_feedback_core_with_their_option(variant, option, monkeypatch):
    """--cores feedback-carry (or -kept, -tanh): its keeping option on the Feedback core at each
    span, in a folder of its own, its reach unbounded as the Feedback core's; its flags pass
    train_a2c.py's checks (on the Python step: checking flags need not wait for the C++ step's
    first build)."""
    from experiments import corridor_span
    from experiments.frame.train_flags import check_train_flags

    monkeypatch.setenv("FEEDBACK_RL_COMPILED", "0")

    assert corridor_span.trained_core(variant) == "feedback"
    core, options = corridor_span.ATTENTION[variant]
    check_train_flags(corridor_span.make_parser(), "a2c", ["--env", "corridor", "--core", core, "--core-opt", f"span=2,n_layers=2{options}"])
    assert options == f",{option}"


@pytest.mark.parametrize("argv, message", [
    (["--entropy-coef", "-0.1"], "argument --entropy-coef: must be a finite number >= 0, got -0.1"),
    (["--spans", "0"], "argument --spans: must be an integer >= 1, got 0"),
    (["--seeds", "1"], "--seeds"),
    (["--preset", "gpu"], "argument --preset: invalid choice: 'gpu'"),
    (["--num-minibatches", "2"], "--num-minibatches 2 is a PPO setting; it needs --algo ppo (got --algo a2c)"),
    (["--algo", "ppo", "--num-minibatches", "0"], "argument --num-minibatches: must be an integer >= 1, got 0"),
])
def test_bad_corridor_span_arguments_exit_2_naming_the_value(argv, message, capsys):
    from experiments import corridor_span

    with pytest.raises(SystemExit) as exit_info:
        corridor_span.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("experiment, argv, message", [
    (mazes, ["--envs", "nowhere"], "argument --envs: unknown env 'nowhere'; choose from ['corridor', 'maze', 'maze_easy', 'memory_length', 'tmaze', 'water_maze']"),
    (mazes, ["--envs", "maze", "FeedbackRL/Maze-v0"], "argument --envs: 'maze' and 'FeedbackRL/Maze-v0' are the same; give each once"),
    (mazes, ["--cores", "rnn"], "argument --cores: invalid choice: 'rnn'"),
    (mazes, ["--cores", "lstm", "feedback", "lstm"], "argument --cores: 'lstm' is given twice; give each once"),
    (corridor_span, ["--cores", "lstm"], "argument --cores: invalid choice: 'lstm'"),
    (corridor_span, ["--algo", "dqn"], "argument --algo: invalid choice: 'dqn'"),  # its runs pass A2C's own flags: DQN only where a runner leaves them out
    (corridor_span, ["--spans", "x"], "argument --spans: must be an integer >= 1, got 'x'"),
    (corridor_span, ["--spans", "2", "4", "2"], "argument --spans: 2 is given twice; give each once"),
    (head_init, ["--tasks", "corridor", "corridor"], "argument --tasks: 'corridor' is given twice; give each once"),
])
def test_bad_experiment_lists_exit_2_naming_the_value(experiment, argv, message, capsys):
    """Each value of a list flag names runs of their own (a run folder, a table row): one given
    twice would train two processes in one folder at once (mazes, head_init; "maze" and its id
    are one folder) or repeat a row, so it is refused like a value not allowed. Parsing only: a bad
    value that slipped through would start the experiment."""
    with pytest.raises(SystemExit) as exit_info:
        experiment.make_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_quick_mazes_have_sizes_for_every_core_they_take():
    """`--quick --cores reservoir` ended in a KeyError: every --cores choice needs tiny sizes,
    and they must be options its core takes."""
    for core in CORES:
        parse_core_options(core, [mazes.QUICK_CORE[core]])


def test_a_quick_experiment_trains_with_ppo_into_files_of_its_own(tmp_path, monkeypatch):
    """--algo ppo: train_ppo.py runs (PPO checkpoints), the JSON says so, and the outputs and the
    runs take a _ppo suffix, so an A2C experiment's are never read or overwritten."""
    from agents.runtime.checkpoint import load_checkpoint

    out = tmp_path / "out"
    argv = ["--quick", "--algo", "ppo", "--envs", "corridor", "--cores", "lstm", "--seeds", "2", "--frames", "512", "--out", str(out),
            "--jobs", "2", "--no-estimate"]
    monkeypatch.setattr(mazes, "ROOT", tmp_path)  # the default runs folder: tmp_path/runs/experiments/mazes_ppo(-quick)
    monkeypatch.setattr(sys, "argv", ["mazes"] + argv)
    mazes.main(argv)
    summary = json.loads((out / "mazes_ppo.json").read_text())
    assert summary["algo"] == "ppo" and not (out / "mazes.json").exists()
    run = tmp_path / "runs" / "experiments" / "mazes_ppo-quick" / "corridor" / "lstm" / "seed0"  # --quick: a folder of its own
    assert load_checkpoint(run, "ppo")["counters"]["global_step"] == 512


def test_a_ppo_corridor_span_run_takes_the_minibatches_asked_for(tmp_path, monkeypatch):
    """--algo ppo --num-minibatches N reaches train_ppo.py (the run's config, over --quick's own
    count), and the runs go to a folder of their own, so runs with other minibatches are not resumed."""
    from experiments import corridor_span

    out = tmp_path / "out"
    argv = ["--quick", "--algo", "ppo", "--num-minibatches", "4", "--spans", "1", "--cores", "feedback", "--references",
            "--seeds", "2", "--frames", "256", "--length", "3", "--out", str(out), "--jobs", "2"]
    monkeypatch.setattr(corridor_span, "ROOT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["corridor_span"] + argv)
    corridor_span.main(argv)
    summary = json.loads((out / "corridor_span_ppo.json").read_text())
    assert (summary["algo"], summary["num_minibatches"]) == ("ppo", 4)
    run = tmp_path / "runs" / "experiments" / "corridor_span" / "ppo-mb4-L3-T32-obs-ent0.01-quick" / "feedback" / "span1" / "seed0"
    assert json.loads((run / "config.json").read_text())["num_minibatches"] == 4
    assert "of PPO (4 minibatches per epoch)" in (out / "corridor_span_ppo.md").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--env-opt", "penalty=action"], "--env-opt penalty=action: give a --name of its own, or its runs would resume the plain sweep's"),
    (["--env-opt", "penalty=bogus", "--name", "x"], "--env-opt penalty=bogus: penalty must be one of ['schedule', 'action'], got 'bogus'"),
    (["--env-opt", "colour=3", "--name", "x"], "--env-opt colour=3: passivetmaze has no option 'colour'"),
    (["--env-opt", "length=3", "--name", "x"], "--env-opt length=3: length is the sweep's (--lengths)"),
    (["--env-opt", "expose_goal", "--name", "x"], "env option 'expose_goal' must look like KEY=VALUE"),
])
def test_bad_memory_length_env_options_exit_2_naming_them(argv, message, capsys, tmp_path):
    """The T-maze's controls (penalty=action, expose_goal=true) are checked by building the env
    before any run starts, and need a sweep name of their own."""
    from experiments import memory_length

    with pytest.raises(SystemExit) as exit_info:
        memory_length.main(["--quick", "--out", str(tmp_path), "--runs-dir", str(tmp_path / "runs"), *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_quick_memory_length_experiment_follows_the_episode_with_the_gradient_window(tmp_path, monkeypatch):
    """Every run's gradient window follows its episode (--bptt episode), the episode-span
    Transformer's span covers it (L + 1 on the T-maze), chrono's T_max is twice it; the MLP runs at
    the shortest length only; --env-opt reaches every run; each run's reading and each cell's failures are in the JSON, the readings kept in the ledger; JSON,
    table and figure are written."""
    from experiments import memory_length

    out = tmp_path / "out"
    argv = ["--quick", "--lengths", "2", "4", "--models", "transformer-episode", "mlp", "--seeds", "2", "--frames", "64",
            "--rollout", "2", "--eval-episodes", "2", "--train-args", "--learning-rate 0.002", "--env-opt", "penalty=action",
            "--name", "memory_length_tmaze", "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--jobs", "2"]
    monkeypatch.setattr(sys, "argv", ["memory_length"] + argv)
    memory_length.main(argv)
    summary = json.loads((out / "memory_length_tmaze.json").read_text())
    assert {name: sorted(model["lengths"]) for name, model in summary["models"].items()} == {
        "transformer-episode": ["2", "4"], "mlp": ["2"]}
    for length in (2, 4):
        config = json.loads((tmp_path / "runs" / "transformer-episode" / f"L{length}" / "seed1" / "config.json").read_text())
        assert (config["bptt"], config["rollout"], config["core_options"]["span"]) == ("episode", 2, length + 1)
        assert memory_length.model_args("gru-chrono", "tmaze", length, quick=False) == [
            "--core", "gru", "--core-opt", f"gate_init=chrono,t_max={2 * (length + 1)}"]
        assert memory_length.model_args("lstm", "tmaze", length, quick=False) == ["--core", "lstm", "--core-opt", "gate_init=pytorch"]
        assert config["previous_inputs"] is False and config["env_options"] == {"length": length, "penalty": "action"}  # --env-opt too
        assert config["learning_rate"] == 0.002  # --train-args reach every run
    cell = summary["models"]["transformer-episode"]["lengths"]["4"]
    assert [run["seed"] for run in cell["per_seed"]] == [0, 1]
    assert all(0.0 <= run[key] <= 1.0 for run in cell["per_seed"] for key in ("greedy_success", "sampled_success"))
    assert cell["solved"]["runs"] == 2 and summary["bptt"] == "episode" and summary["env_options"] == {"penalty": "action"}
    assert all(sorted(run["reading"]) == ["reaches_junction", "turns", "turns_right_way", "walks"] for run in cell["per_seed"])
    unsolved = sum(run["greedy_success"] < 0.95 for run in cell["per_seed"])
    assert cell["failures"]["runs_unsolved"] == unsolved == sum(v for k, v in cell["failures"].items() if k != "runs_unsolved")
    assert (out / "memory_length_tmaze.png").stat().st_size > 0
    table = (out / "memory_length_tmaze.md").read_text()
    assert "| transformer-episode | 4 |" in table and "then --train-args '--learning-rate 0.002', whose flags win" in table
    kept = json.loads((out / "memory_length_tmaze_runs.json").read_text())  # each run's reading too: it needs the checkpoint
    assert json.loads(kept["transformer-episode/L4/seed1"]["reading.done.json"]["last_line"])["walks"] == cell["per_seed"][1]["reading"]["walks"]


def test_a_quick_memory_length_experiment_runs_bsuites_recall_task(tmp_path, monkeypatch):
    """--env memory_length: bsuite's memory_len at each length (the env's `length`), its episodes
    L + 1 steps like the T-maze's (the gradient window and the bsuite budget count them), success
    from the env's last step, and no T-maze reading."""
    from experiments import memory_length

    out = tmp_path / "out"
    argv = ["--quick", "--env", "memory_length", "--lengths", "3", "--models", "mlp", "--seeds", "2", "--budget", "bsuite",
            "--eval-episodes", "2", "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--jobs", "2", "--frames", "64"]
    with pytest.raises(SystemExit):  # --frames and --budget: one of them
        memory_length.main(argv)
    argv.remove("--budget"), argv.remove("bsuite")
    monkeypatch.setattr(sys, "argv", ["memory_length"] + argv)
    memory_length.main(argv)
    summary = json.loads((out / "memory_length_recall.json").read_text())
    assert summary["env"] == "memory_length" and list(summary["models"]) == ["mlp"] and summary["complete"]
    config = json.loads((tmp_path / "runs" / "mlp" / "L3" / "seed0" / "config.json").read_text())
    assert (config["env"], config["env_options"], config["bptt"]) == ("memory_length", {"length": 3}, "episode")
    cell = summary["models"]["mlp"]["lengths"]["3"]
    assert "failures" not in cell and all("reading" not in run for run in cell["per_seed"])
    assert all(run["greedy_success"] in (0.0, 0.5, 1.0) for run in cell["per_seed"])  # 2 episodes, each right or wrong
    assert memory_length.episode_steps("memory_length", 3) == 4 and "memory length task" in (out / "memory_length_recall.md").read_text()
    assert "The sweep so far" not in (out / "memory_length_recall.md").read_text()
    partial = {**summary, "complete": False, "lengths": [3, 6], "lengths_done": [3]}  # as written after L = 3 of 3 and 6
    assert memory_length.table(partial).startswith("**The sweep so far**: lengths 3 of 3, 6 are done; the same command resumes it.")

    # The same sweep on a machine without its run folders resumes from its ledger and trains nothing.
    shutil.rmtree(tmp_path / "runs")
    memory_length.main(argv)
    assert not (tmp_path / "runs").exists()
    again = json.loads((out / "memory_length_recall.json").read_text())
    assert again["models"] == summary["models"]  # training seconds included: from the records, the event files being gone


def test_estimate_only_times_each_dqn_model_and_trains_nothing(tmp_path, monkeypatch):
    """--estimate-only: an update of each (model, length) timed, one that learns for DQN
    (experiments/frame/estimate.py), the expected time of every run to its budget written with
    each model's rate; no run folder made."""
    from experiments import memory_length

    out, runs = tmp_path / "out", tmp_path / "runs"
    argv = ["--quick", "--algo", "dqn", "--env", "tmaze", "--lengths", "3", "6", "--models", "gru", "lstm", "--seeds", "2", "--frames", "2048",
            "--runs-dir", str(runs), "--out", str(out), "--jobs", "2", "--estimate-only"]
    monkeypatch.setattr(sys, "argv", ["memory_length"] + argv)
    memory_length.main(argv)
    estimate = json.loads((out / "memory_length_tmaze_dqn_estimate.json").read_text())
    assert (estimate["runs"], estimate["models_timed"], estimate["jobs_at_once"]) == (8, 4, 2)
    assert [rate["first_run"] for rate in estimate["rates"]] == ["gru L3 seed 0", "gru L6 seed 0", "lstm L3 seed 0", "lstm L6 seed 0"]
    assert all(rate["program"] == "train_dqn" and rate["seconds_per_unit"] > 0 and rate["units_a_run"] == 2048 for rate in estimate["rates"])
    each = [rate["seconds_per_unit"] * 2048 for rate in estimate["rates"]]
    assert estimate["expected_seconds_every_run_to_its_cap"] == round(max(2 * sum(each) / 2, max(each)))  # 2 seeds each, 2 at once
    assert "--estimate-only" in estimate["command"] and not runs.exists() and not (out / "memory_length_tmaze_dqn.json").exists()


def test_a_quick_memory_length_experiment_trains_with_dqn_into_files_of_its_own(tmp_path, monkeypatch):
    """--algo dqn: train_dqn.py runs (DQN checkpoints, DQN's config fields, no gradient window
    set: train_dqn.py refuses --bptt), into NAME_dqn files whose JSON and table say DQN and whose
    ledger keeps the runs."""
    from agents.runtime.checkpoint import load_checkpoint
    from experiments import memory_length

    out, runs = tmp_path / "out", tmp_path / "runs"
    argv = ["--quick", "--algo", "dqn", "--env", "memory_length", "--lengths", "3", "--models", "mlp", "--seeds", "2", "--frames", "1024",
            "--eval-episodes", "2", "--train-args", "--solve-at 0.99 --eval-every 512 --eval-episodes 4", "--runs-dir", str(runs), "--out",
            str(out), "--jobs", "2"]
    monkeypatch.setattr(sys, "argv", ["memory_length"] + argv)
    memory_length.main(argv)
    summary = json.loads((out / "memory_length_recall_dqn.json").read_text())
    assert not (out / "memory_length_recall.json").exists()
    assert (summary["algo"], summary["bptt"], summary["replay"], summary["rollout"]) == ("dqn", None, "episodes", memory_length.DQN_ROLLOUT)
    assert [run["seed"] for run in summary["models"]["mlp"]["lengths"]["3"]["per_seed"]] == [0, 1]
    for seed in (0, 1):
        run = runs / "mlp" / "L3" / f"seed{seed}"
        assert load_checkpoint(run, "dqn")["counters"]["global_step"] == 1024  # a DQN checkpoint: refused as any other kind
        config = json.loads((run / "config.json").read_text())
        assert (config["bptt"], config["rollout"], config["learning_starts"], config["previous_inputs"]) == (0, 16, 512, False)
    kept = json.loads((out / "memory_length_recall_dqn_runs.json").read_text())
    assert sorted(kept) == ["mlp/L3/seed0", "mlp/L3/seed1"]
    assert any(part.endswith("train_dqn.py") for part in kept["mlp/L3/seed0"]["train.done.json"]["command"])
    # not greedy, a DQN run is evaluated epsilon-greedy, as it acted; the target says so, so older records are redone
    sampled = kept["mlp/L3/seed0"]["evaluate-sampled.done.json"]
    assert sampled["target"].endswith(", epsilon-greedy") and "epsilon" in json.loads(sampled["last_line"])
    assert summary["eval"] == "2 greedy and 2 epsilon-greedy (at the run's last epsilon) episodes per run"
    table = (out / "memory_length_recall_dqn.md").read_text()
    assert "against its length L, DQN, rollouts of 16 steps and a gradient window over whole episodes replayed" in table
    assert "sampled: epsilon-greedy as the run acted at its last frame" in table
    # --solve-at: each run's checks kept in its record and its per-seed entry (the MLP cannot remember: censored at the cap)
    per_seed = summary["models"]["mlp"]["lengths"]["3"]["per_seed"]
    for seed, run in enumerate(per_seed):
        checks = json.loads((runs / "mlp" / "L3" / f"seed{seed}" / "solve.json").read_text())
        assert kept[f"mlp/L3/seed{seed}"]["train.done.json"]["solve"] == checks
        assert run["solve"]["frames_to_solve"] == checks["frames_to_solve"] and [c["score"] for c in run["solve"]["checks"]] == [
            c["score"] for c in checks["checks"]] and len(checks["checks"]) >= 1
    texts = [f"{run['solve']['frames_to_solve']:,}" if run["solve"]["solved"] else f"censored at {run['solve']['censored_at']:,}" for run in per_seed]
    assert f"| {', '.join(texts)} |" in table and "frames to solve per seed" in table


def test_the_stop_rule_ends_a_models_sweep_after_n_unsolved_lengths_in_a_row_but_not_the_mlps(monkeypatch):
    """--stop-after 2 runs the lengths in turn: the LSTM, unsolved at 2 and 4 after solving 1,
    runs no longer one; the Transformer, unsolved at 2 but solved at 4, goes on; the MLP (the
    chance line) is never stopped. Each stage runs only the cells still in the sweep,
    and the results so far are written after each length."""
    import argparse

    from experiments import memory_length

    seeds, lengths = [0, 1], [1, 2, 4, 8]
    models = ["lstm", "transformer-span16", "mlp"]
    cells = [(model, length) for length in lengths for model in models]
    solves = {("lstm", 1), ("transformer-span16", 1), ("transformer-span16", 4), ("transformer-span16", 8)}  # by seed 1 only
    stages = []
    monkeypatch.setattr(memory_length, "run_stages", lambda stage, args: stages.append({what: list(jobs) for what, jobs in stage.items()}))
    monkeypatch.setattr(memory_length, "evaluation", lambda job: {"agent": {"success": 1.0 if job[0] in solves and job[1] == 1 else 0.5}})
    greedy = {(cell, seed): (cell, seed) for cell in cells for seed in seeds}  # a job stands for its run here
    training = {run: argparse.Namespace(run=run, then=(run, ("sampled", run))) for run in greedy}  # then: its two evaluations
    written = []  # what each length's write_results got: the cells run so far, the models stopped, complete
    last = memory_length.run_lengths_in_turn(cells, lambda length: seeds, training, greedy, argparse.Namespace(stop_after=2),
                                             lambda run, stopped, complete: written.append((list(run), stopped, complete)) or {"length": len(written)})
    assert last == {"length": 4} and [complete for *_, complete in written] == [False, False, False, True]
    run, stopped, _ = written[-1]
    assert stopped == {"lstm": 4} and written[1][1] == {}  # the LSTM's second unsolved length is 4
    assert run == [cell for cell in cells if not (cell[0] == "lstm" and cell[1] == 8)]
    assert written[0][0] == [cell for cell in cells if cell[1] == 1]  # after L = 1, its results alone
    assert [sorted({job.run[0][0] for job in stage[f"training, L = {length}"]}) for stage, length in zip(stages, lengths)] == [
        sorted(models), sorted(models), sorted(models), ["mlp", "transformer-span16"]]
    assert len(stages[3]["evaluation, L = 8"]) == 2 * 2 * 2  # greedy and sampled, 2 models, 2 seeds


def test_memory_length_reach_is_the_longest_length_most_seeds_solve_with_every_shorter_one():
    from experiments.memory_length import reach

    def model(solved_per_length):
        return {"lengths": {str(length): {"solved": {"solved": solved, "runs": 5}} for length, solved in solved_per_length.items()}}

    assert reach(model({8: 5, 16: 3, 32: 2, 64: 5})) == 16  # 64 solved again does not count past a failed 32
    assert reach(model({8: 2, 16: 5})) is None
    assert reach(model({8: 5, 16: 5})) == 16
    from experiments.memory_length import score

    assert score(model({8: 5, 16: 3, 32: 2, 64: 5}), 4) == 0.75  # 3 of 5 is most; 64 counts here, unlike for reach
    assert score(model({8: 5, 16: 0}), 4) == 0.25  # two lengths the stop rule left out count as unsolved


def test_the_bsuite_budget_is_ten_thousand_episodes_then_at_most_three_million_frames():
    from experiments import memory_length

    args = memory_length.make_parser().parse_args(["--budget", "bsuite"])
    frames = {length: memory_length.frames_at(args, length) for length in (1, 16, 128, 256, 512, 1024)}
    assert frames == {1: 20_000, 16: 170_000, 128: 1_290_000, 256: 2_570_000, 512: 3_000_000, 1024: 3_000_000}
    default = memory_length.make_parser().parse_args([])
    assert memory_length.frames_at(default, 16) == 1_000_000  # Ni et al.'s, unchanged
    longer = memory_length.make_parser().parse_args(["--budget", "bsuite", "--frame-scale", "4"])
    assert [memory_length.frames_at(longer, length) for length in (64, 512)] == [2_600_000, 12_000_000]  # either budget, scaled


@pytest.mark.parametrize("argv, message", [
    (["--doors", "fixed"], "--doors fixed is a corridor option; it needs --env corridor (got --env tmaze)"),
    (["--frames", "1000", "--frame-scale", "0.1"], "give --frames alone, or a --budget (times --frame-scale)"),
    (["--frames", "1000", "--budget", "bsuite"], "give --frames alone, or a --budget (times --frame-scale)"),
    (["--env", "corridor", "--budget", "bsuite"], "--budget bsuite counts episodes of L + 1 steps, the T-maze's and memory_length's; the corridor's episodes vary"),
    (["--budget", "dqn"], "argument --budget: invalid choice: 'dqn'"),
    (["--models", "lstm", "lstm"], "argument --models: 'lstm' is given twice; give each once"),
    (["--lengths", "0"], "argument --lengths: must be an integer >= 1, got 0"),
    (["--frame-scale", "0"], "argument --frame-scale: must be a finite number > 0, got 0"),
    (["--num-minibatches", "2"], "--num-minibatches 2 is a PPO setting; it needs --algo ppo (got --algo a2c)"),
    (["--algo", "dqn", "--num-minibatches", "2"], "--num-minibatches 2 is a PPO setting; it needs --algo ppo (got --algo dqn)"),
    (["--algo", "dqn", "--entropy-coef", "0.01"], "--entropy-coef 0.01 is an A2C and PPO setting; train_dqn.py acts epsilon-greedily"),
    (["--algo", "dqn", "--quick", "--train-args", "--bptt 64"], "are refused by train_dqn.py: bptt=64: A2C's, which DQN does not read"),
])
def test_bad_memory_length_arguments_exit_2_naming_the_value(argv, message, capsys):
    from experiments import memory_length

    with pytest.raises(SystemExit) as exit_info:
        memory_length.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_quick_runs_go_to_a_folder_of_their_own(tmp_path):
    """A full experiment resumes the runs it finds in its folder; a --quick run there before it
    would be carried on with its tiny model. So --quick runs go beside, and --runs-dir wins."""
    import argparse

    from experiments.frame.flags import runs_folder

    default = tmp_path / "runs" / "corridor_span"
    assert runs_folder(argparse.Namespace(runs_dir=None, quick=False), default) == default
    assert runs_folder(argparse.Namespace(runs_dir=None, quick=True), default) == tmp_path / "runs" / "corridor_span-quick"
    assert runs_folder(argparse.Namespace(runs_dir=tmp_path / "mine", quick=True), default) == tmp_path / "mine"


def test_fewer_seeds_from_a_length_on_run_and_report_only_those(tmp_path, monkeypatch):
    """--fewer-seeds LENGTH N (issue 50: 3 seeds from L = 128): lengths from LENGTH on run seeds
    0 .. N-1 only, each cell's statistics over its own seeds, and the tables say so."""
    from experiments import memory_length

    out = tmp_path / "out"
    argv = ["--quick", "--env", "memory_length", "--lengths", "2", "3", "--models", "mlp", "--seeds", "3", "--fewer-seeds", "3", "2",
            "--eval-episodes", "2", "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--jobs", "2", "--floor-every-length"]
    monkeypatch.setattr(sys, "argv", ["memory_length"] + argv)
    memory_length.main(argv)
    summary = json.loads((out / "memory_length_recall.json").read_text())
    lengths = summary["models"]["mlp"]["lengths"]
    assert [[run["seed"] for run in lengths[length]["per_seed"]] for length in ("2", "3")] == [[0, 1, 2], [0, 1]]
    assert lengths["3"]["solved"]["runs"] == 2 and not (tmp_path / "runs" / "mlp" / "L3" / "seed2").exists()
    assert summary["fewer_seeds"] == {"from_length": 3, "seeds": 2} and "3 seeds (2 from L = 3)" in (out / "memory_length_recall.md").read_text()
    with pytest.raises(SystemExit):  # more seeds than --seeds
        memory_length.main([*argv[:-2], "--fewer-seeds", "3", "4"])
