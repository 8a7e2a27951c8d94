"""The memory length task's walk to the query (experiments/cue_memory.py) and the probes of a
sweep's runs on it (experiments/recall_cliff.py)."""

import json
import shutil

import numpy as np
import pytest
import torch
from gymnasium.spaces import MultiDiscrete

from agents.config.a2c_config import A2CConfig
from agents.evaluation import evaluation_seeds
from agents.learners.train import build_policy
from agents.runtime.actors import LocalEnvs
from experiments import recall_cliff
from experiments.cue_memory import SEED, trained_and_fresh, walk_to_query
from experiments.memory_probes import probe

LENGTH = 5


def test_the_walk_shows_the_bit_first_and_the_query_last_and_knows_the_answer():
    walk = walk_to_query({"length": LENGTH}, episodes=16)
    assert walk.obs.shape == (LENGTH + 1, 16, 3)  # (time to go, query, bit) from t = 0 to the decision at t = L
    assert (walk.obs[:, :, 0] == np.arange(LENGTH, -1, -1)[:, None]).all()
    assert (walk.obs[0, :, 2] == walk.cue).all() and (walk.obs[1:, :, 2] == 0).all()  # the bit only at the first step
    assert (walk.obs[-1, :, 1] == 1).all() and (walk.obs[:-1, :, 1] == 0).all()  # the query only at the last
    assert set(walk.cue) == {1, 2} and set(walk.group) == {0}  # both bits drawn; one bit, so one query
    envs = LocalEnvs("memory_length", evaluation_seeds(SEED, 16), {"length": LENGTH})  # the same episodes, answered as the walk says
    envs.reset()
    for _ in range(LENGTH):
        envs.step(np.zeros(16, dtype=np.int64))
    _, reward, terminated, _, _ = envs.step(walk.correct)
    envs.close()
    assert terminated.all() and (reward == 1.0).all()


def recall_policy(core: str, **core_options):
    torch.manual_seed(0)
    config = A2CConfig(env="memory_length", core=core, core_options=core_options, env_options={"length": LENGTH})
    return build_policy(config, MultiDiscrete([LENGTH + 1, 2, 3]), 2).eval()


def test_the_gradient_to_the_bit_is_zero_exactly_past_a_transformers_reach():
    """The bit is L = 5 steps before the query: two layers of span 2 reach 4 steps back, none of
    the decision's gradient gets to it; span 3 reaches 6, and so do a Feedback core at span 1 and
    an LSTM, through their recurrence."""
    walk = walk_to_query({"length": LENGTH}, episodes=16)
    assert probe(recall_policy("transformer", span=2, n_layers=2, d_model=16, n_heads=2), walk)["gradient_to_cue"] == 0.0
    assert probe(recall_policy("transformer", span=3, n_layers=2, d_model=16, n_heads=2), walk)["gradient_to_cue"] > 1e-6
    numbers = probe(recall_policy("feedback", span=1, n_layers=2, d_model=16, n_heads=2), walk)
    assert numbers["gradient_to_cue"] > 1e-6 and 0 < numbers["retention"]
    assert probe(recall_policy("lstm", hidden_size=16), walk)["gradient_to_cue"] > 1e-6
    assert probe(recall_policy("mlp", hidden_size=16), walk)["gradient_to_cue"] == 0.0


def test_a_sweeps_runs_are_probed_fresh_and_trained(tmp_path, capsys):
    """Every run of the sweep's JSON, found in its run folder by model, length and seed, probed
    twice: its final policy and a fresh one of its config and seed."""
    from train_a2c import main as train

    out, runs = tmp_path / "out", tmp_path / "runs"
    per_seed = []
    for seed in (0, 1):
        train(["--env", "memory_length", "--env-opt", "length=3", "--core", "feedback", "--core-opt", "span=2,d_model=8,n_heads=2",
               "--num-envs", "4", "--rollout", "4", "--total-steps", "32", "--seed", str(seed), "--run-dir", str(runs / "feedback-span2" / "L3" / f"seed{seed}")])
        per_seed.append({"seed": seed, "greedy_success": 0.5})
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"env": "memory_length", "models": {"feedback-span2": {"lengths": {"3": {"per_seed": per_seed}}}}}))
    recall_cliff.main(["--name", "sweep", "--runs-dir", str(runs), "--out", str(out), "--episodes", "8"])
    result = json.loads((out / "sweep_probes.json").read_text())
    assert result["source"] == "sweep.json" and result["episodes"] == 8
    runs_probed = result["models"]["feedback-span2"]["3"]["per_seed"]
    assert [run["seed"] for run in runs_probed] == [0, 1]
    for run in runs_probed:
        assert set(run) == {"seed", "greedy_success", "fresh", "trained"} and set(run["fresh"]) == set(recall_cliff.KEPT) - {"kept_retention"}
        assert run["fresh"]["gradient_to_cue"] > 0 and run["fresh"] != run["trained"]  # 3 steps back: within the memory's reach; trained moved
    trained = trained_and_fresh(str(runs / "feedback-span2" / "L3" / "seed1"), ("memory_length",))
    assert trained[0].config.seed == 1  # the folder the seed names
    assert "| feedback-span2 | 3 | 0 of 2 |" in (out / "sweep_probes.md").read_text()

    # The sweep resumed elsewhere and went on to L = 5: the runs probed before have no folder there
    # and are kept; the new length's runs (here stand-ins: L3's folders) are probed.
    (runs / "feedback-span2" / "L3").rename(runs / "feedback-span2" / "L5")
    sweep = {"env": "memory_length", "models": {"feedback-span2": {"lengths": {"3": {"per_seed": per_seed}, "5": {"per_seed": per_seed}}}}}
    (out / "sweep.json").write_text(json.dumps(sweep))
    recall_cliff.main(["--name", "sweep", "--runs-dir", str(runs), "--out", str(out), "--episodes", "8"])
    again = json.loads((out / "sweep_probes.json").read_text())
    assert again["models"]["feedback-span2"]["3"] == result["models"]["feedback-span2"]["3"] and again["runs_kept_from_before"] == 2
    assert [run["seed"] for run in again["models"]["feedback-span2"]["5"]["per_seed"]] == [0, 1]
    with pytest.raises(SystemExit) as exited:  # probes of another number of episodes are not mixed in
        recall_cliff.main(["--name", "sweep", "--runs-dir", str(runs), "--out", str(out), "--episodes", "16"])
    assert exited.value.code == 2 and "was probed with --episodes 8, not 16" in capsys.readouterr().err


def test_a_narrow_call_adds_to_the_probes_and_keeps_what_earlier_calls_probed(tmp_path, capsys):
    """--models and --lengths choose what a call probes; the runs earlier calls probed outside them
    stay in the file as they were, and a length the sweep never ran is refused by name."""
    from train_a2c import main as train

    out, runs = tmp_path / "out", tmp_path / "runs"
    train(["--env", "memory_length", "--env-opt", "length=3", "--core", "lstm", "--core-opt", "hidden_size=8",
           "--num-envs", "4", "--rollout", "4", "--total-steps", "16", "--seed", "0", "--run-dir", str(runs / "lstm" / "L3" / "seed0")])
    for model, length in (("lstm", "5"), ("gru-stand-in", "3")):  # stand-ins: the same run's folder
        shutil.copytree(runs / "lstm" / "L3", runs / model / f"L{length}")
    cell = {"per_seed": [{"seed": 0, "greedy_success": 0.5}]}
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"env": "memory_length", "models": {
        "lstm": {"lengths": {"3": cell, "5": cell}}, "gru-stand-in": {"lengths": {"3": cell}}}}))
    call = lambda *flags: recall_cliff.main(["--name", "sweep", "--runs-dir", str(runs), "--out", str(out), "--episodes", "8", *flags])  # noqa: E731
    call("--models", "lstm", "--lengths", "5")
    first = json.loads((out / "sweep_probes.json").read_text())["models"]
    assert list(first) == ["lstm"] and list(first["lstm"]) == ["5"]
    call("--models", "gru-stand-in")
    second = json.loads((out / "sweep_probes.json").read_text())["models"]
    assert second["lstm"] == first["lstm"] and list(second["gru-stand-in"]) == ["3"]
    call("--lengths", "3")
    third = json.loads((out / "sweep_probes.json").read_text())
    assert third["models"]["lstm"]["5"] == first["lstm"]["5"] and list(third["models"]["lstm"]) == ["3", "5"]
    assert third["runs_kept_from_before"] == 1  # gru-stand-in's L = 3, not probed again
    assert [command.split("--episodes 8")[-1] for command in third["commands"]] == [" --models lstm --lengths 5", " --models gru-stand-in", " --lengths 3"]
    with pytest.raises(SystemExit) as exited:
        call("--models", "gru-stand-in", "--lengths", "3", "7")
    assert exited.value.code == 2 and "--lengths: 7 not run for gru-stand-in" in capsys.readouterr().err


def test_a_frames_to_solve_sweeps_runs_are_probed_with_the_kept_slots_retention(tmp_path):
    """A frames-to-solve sweep's JSON names the task, not the env, and gives each run its checks,
    not a greedy success: the run's is its last check's (the confirmation where it solved). A
    core with a kept slot (reference.py's keep_slot) has that slot's retention probed too."""
    from train_a2c import main as train

    out, runs = tmp_path / "out", tmp_path / "runs"
    train(["--env", "memory_length", "--env-opt", "length=3,show_time=false", "--core", "feedback", "--core-opt",
           "span=2,d_model=8,n_heads=2,keep_slot=True", "--num-envs", "4", "--rollout", "4", "--total-steps", "32", "--seed", "0",
           "--run-dir", str(runs / "feedback-kept" / "L3" / "seed0")])
    checks = [{"frames": 16, "episodes": 4, "score": 0.5}, {"frames": 32, "episodes": 8, "score": 1.0, "confirmation": 0.96}]
    out.mkdir()
    (out / "fts.json").write_text(json.dumps({"task": "memory_length, show_time=False", "models": {
        "feedback-kept": {"lengths": {"3": {"per_seed": [{"seed": 0, "solved": True, "checks": checks}]}}}}}))
    recall_cliff.main(["--name", "fts", "--runs-dir", str(runs), "--out", str(out), "--episodes", "8"])
    (run,) = json.loads((out / "fts_probes.json").read_text())["models"]["feedback-kept"]["3"]["per_seed"]
    assert run["greedy_success"] == 0.96 and set(run["fresh"]) == set(recall_cliff.KEPT)
    assert 0 < run["fresh"]["kept_retention"] < 1.5


def test_a_length_under_way_is_probed_from_the_ledger_where_its_checkpoints_are(tmp_path):
    """The sweep's JSON holds L = 3; its ledger also keeps L = 5's seed 0, trained here, and seed 1,
    trained on a machine whose folders are gone: seed 0 is probed beside L = 3, marked as a length
    under way, and kept when the length is done and the JSON has it."""
    from train_a2c import main as train

    out, runs = tmp_path / "out", tmp_path / "runs"
    for length in (3, 5):
        train(["--env", "memory_length", "--env-opt", f"length={length}", "--core", "lstm", "--core-opt", "hidden_size=8",
               "--num-envs", "4", "--rollout", "4", "--total-steps", "16", "--seed", "0", "--run-dir", str(runs / "lstm" / f"L{length}" / "seed0")])
    evaluated = lambda success: {"evaluate.done.json": {"last_line": json.dumps({"results": {"agent": {"success": {"mean": success}}}})}}  # noqa: E731
    out.mkdir()
    shutil.copytree(runs / "lstm" / "L5", runs / "lstm-long" / "L5")  # a model whose first length is under way: in the ledger only
    (out / "sweep_runs.json").write_text(json.dumps({"lstm/L3/seed0": evaluated(0.5), "lstm/L5/seed0": evaluated(1.0), "lstm/L5/seed1": evaluated(0.42),
                                                     "lstm-long/L5/seed0": evaluated(0.42)}))
    sweep = {"env": "memory_length", "models": {"lstm": {"lengths": {"3": {"per_seed": [{"seed": 0, "greedy_success": 0.5}]}}}}}
    (out / "sweep.json").write_text(json.dumps(sweep))
    recall_cliff.main(["--name", "sweep", "--runs-dir", str(runs), "--out", str(out), "--episodes", "8"])
    result = json.loads((out / "sweep_probes.json").read_text())
    cell = result["models"]["lstm"]["5"]
    assert cell["under_way"] and [(run["seed"], run["greedy_success"]) for run in cell["per_seed"]] == [(0, 1.0)]
    assert "under_way" not in result["models"]["lstm"]["3"]
    assert result["models"]["lstm-long"]["5"]["under_way"] and [run["greedy_success"] for run in result["models"]["lstm-long"]["5"]["per_seed"]] == [0.42]
    assert "| lstm | 5 | 1 of 1 (length under way) |" in (out / "sweep_probes.md").read_text()

    # L = 5 done, on another machine: its JSON has both seeds, seed 0's folder is gone; its probe is kept.
    sweep["models"]["lstm"]["lengths"]["5"] = {"per_seed": [{"seed": 0, "greedy_success": 1.0}, {"seed": 1, "greedy_success": 0.42}]}
    (out / "sweep.json").write_text(json.dumps(sweep))
    (runs / "lstm" / "L5").rename(tmp_path / "elsewhere")
    (runs / "lstm" / "L5").mkdir()
    (tmp_path / "elsewhere" / "seed0").rename(runs / "lstm" / "L5" / "seed1")  # seed 1 trained again here (L5's seed 0 stands in)
    recall_cliff.main(["--name", "sweep", "--runs-dir", str(runs), "--out", str(out), "--episodes", "8"])
    again = json.loads((out / "sweep_probes.json").read_text())["models"]["lstm"]["5"]
    assert "under_way" not in again and again["per_seed"][0] == cell["per_seed"][0] and [run["seed"] for run in again["per_seed"]] == [0, 1]


def test_a_frames_to_solve_length_under_way_is_probed_from_its_ledger_and_solve_records(tmp_path):
    """A frames-to-solve ledger keeps a run when it is trained (no evaluation record): at a length
    its JSON does not hold yet, the run is probed where its folder is, its greedy success its last
    check's; a run whose folder is elsewhere (no solve record here) is left out."""
    from train_a2c import main as train

    out, runs = tmp_path / "out", tmp_path / "runs"
    train(["--env", "memory_length", "--env-opt", "length=5,show_time=false", "--core", "lstm", "--core-opt", "hidden_size=8",
           "--num-envs", "4", "--rollout", "4", "--total-steps", "16", "--seed", "0", "--run-dir", str(runs / "lstm" / "L5" / "seed0")])
    (runs / "lstm" / "L5" / "seed0" / "solve.json").write_text(json.dumps({"solved": False, "checks": [{"frames": 8, "score": 0.5}, {"frames": 16, "score": 0.52}]}))
    trained = {"train.done.json": {"last_line": "checkpoint: ... (step 16)"}}
    out.mkdir()
    (out / "fts_runs.json").write_text(json.dumps({"lstm/L5/seed0": trained, "lstm/L5/seed1": trained}))
    (out / "fts.json").write_text(json.dumps({"task": "memory_length, show_time=False", "models": {}}))
    recall_cliff.main(["--name", "fts", "--runs-dir", str(runs), "--out", str(out), "--episodes", "8"])
    cell = json.loads((out / "fts_probes.json").read_text())["models"]["lstm"]["5"]
    assert cell["under_way"] and [(run["seed"], run["greedy_success"]) for run in cell["per_seed"]] == [(0, 0.52)]
    assert cell["per_seed"][0]["fresh"]["gradient_to_cue"] > 0


def test_the_probes_refuse_what_is_not_a_recall_sweep(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        recall_cliff.main(["--name", "nothing", "--out", str(tmp_path)])
    assert exited.value.code == 2 and f"no sweep at {tmp_path / 'nothing.json'}" in capsys.readouterr().err
    (tmp_path / "maze.json").write_text(json.dumps({"env": "tmaze", "models": {"lstm": {}}}))
    with pytest.raises(SystemExit):
        recall_cliff.main(["--name", "maze", "--out", str(tmp_path)])
    assert "is a sweep on 'tmaze'" in capsys.readouterr().err
    (tmp_path / "recall.json").write_text(json.dumps({"env": "memory_length", "models": {"lstm": {}}}))
    with pytest.raises(SystemExit):
        recall_cliff.main(["--name", "recall", "--out", str(tmp_path), "--models", "gru"])
    assert "--models: gru not in" in capsys.readouterr().err  # in neither the JSON nor its ledger
