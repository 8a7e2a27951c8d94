"""experiments/ppo_peers.py: our PPO beside sb3-contrib's RecurrentPPO and CleanRL's ppo_trxl.

The shared env gives every agent MiniGrid's own view; the whole experiment runs end to end with
our agents and RecurrentPPO (--quick); CleanRL's side is run with a stand-in for ppo_trxl.py (a
script that records how it was started and logs as ppo_trxl.py does), since CleanRL itself lives
outside this repository in its own environment: what is tested is that it gets the recipe's
flags, runs in its run folder seeing our env module, and that its curve is read.
"""

import json
import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest

from experiments import peer_envs, ppo_peers
from experiments.frame.jobs import ROOT

ENV = ppo_peers.ENV


def test_the_shared_env_is_minigrids_3x3_view_as_27_symbols_with_a_96_step_limit():
    import minigrid  # noqa: F401

    env = gym.make(ENV)
    reference = gym.make("MiniGrid-MemoryS9-v0", agent_view_size=3)
    observation, _ = env.reset(seed=3)
    expected, _ = reference.reset(seed=3)
    assert env.observation_space.shape == (27,) and observation.dtype == np.float32
    np.testing.assert_array_equal(observation, expected["image"].reshape(-1))
    for step in range(1, 200):
        action = step % 3  # left, right, forward: never picks anything up, so only the limit ends it
        observation, _, terminated, truncated, _ = env.step(action)
        expected, _, *_ = reference.step(action)
        np.testing.assert_array_equal(observation, expected["image"].reshape(-1))
        if terminated or truncated:
            break
    assert (step, truncated) == (peer_envs.TIME_LIMIT, True)


def test_the_short_variant_ends_by_24_steps_and_caps_our_memory_as_ppo_trxl_caps_its_own():
    env = gym.make("experiments.peer_envs:SymbolicMemoryS9Short-v0")
    env.reset(seed=3)
    for step in range(1, 200):
        *_, terminated, truncated, _ = env.step(step % 3)
        if terminated or truncated:
            break
    assert (step, truncated) == (peer_envs.SHORT_LIMIT, True)
    assert ppo_peers.capped_memory(ppo_peers.RECIPE, "experiments.peer_envs:SymbolicMemoryS9Short-v0")["memory"] == 24
    assert ppo_peers.capped_memory(ppo_peers.RECIPE, ENV) == ppo_peers.RECIPE  # 64 < 96: as the recipe says


FAKE_TRXL = textwrap.dedent("""
    # Stands in for CleanRL's ppo_trxl.py: records its argv, folder and import path; logs a curve as it does.
    import json, os, sys
    import experiments.peer_envs  # must import: the launcher puts the repository on PYTHONPATH
    from torch.utils.tensorboard import SummaryWriter
    argv = sys.argv[1:]
    flags = {a: (b if not b.startswith("--") else True) for a, b in zip(argv, argv[1:] + ["--"]) if a.startswith("--")}
    json.dump({"flags": flags, "cwd": os.getcwd()}, open("started.json", "w"))
    total = int(flags["--total_timesteps"])
    writer = SummaryWriter("runs/" + flags["--env_id"].replace(":", "_") + "__ppo_trxl__" + flags["--seed"])
    for step in range(total // 4, total + 1, total // 4):
        writer.add_scalar("episode/r_mean", 0.5 + int(flags["--seed"]), step)
    writer.close()
    print("done")
""")


@pytest.fixture
def fake_cleanrl(tmp_path):
    """A folder laid out as scripts/cleanrl_peer.sh makes it, its Python ours, its ppo_trxl.py the fake."""
    folder = tmp_path / "cleanrl-peer"
    (folder / "venv" / "bin").mkdir(parents=True)
    python = folder / "venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')  # ours (a link would lose our virtual environment)
    python.chmod(0o755)
    script = folder / "cleanrl" / "cleanrl" / "ppo_trxl" / "ppo_trxl.py"
    script.parent.mkdir(parents=True)
    script.write_text(FAKE_TRXL)
    return folder


def run_experiment(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.ppo_peers", "--quick", *flags], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_quick_experiment_trains_every_side_and_writes_per_seed_numbers_and_speed_ratios(tmp_path, fake_cleanrl):
    out = tmp_path / "out"
    flags = ["--agents", "lstm", "sb3_lstm", "cleanrl_trxl", "--seeds", "2", "--cleanrl", str(fake_cleanrl),
             "--runs-dir", str(tmp_path / "runs"), "--out", str(out)]
    result = run_experiment(*flags)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "ppo_peers.json").read_text())
    assert summary["frames"] == 4096 and summary["seeds"] == [0, 1]
    for agent in ("lstm", "sb3_lstm", "cleanrl_trxl"):
        runs = summary["agents"][agent]["per_seed"]
        assert [run["seed"] for run in runs] == [0, 1]
        assert all(run["frames_per_second"] > 0 and np.isfinite(run["final_return"]) for run in runs)
        assert len(summary["agents"][agent]["curves"][0]) == ppo_peers.CURVE_BINS
    # The fake logs 0.5 + seed at every quarter: the curve read is that, binned.
    assert [run["final_return"] for run in summary["agents"]["cleanrl_trxl"]["per_seed"]] == [0.5, 1.5]
    assert set(summary["speed_ratios"]) == {"lstm/sb3_lstm"}
    assert (out / "ppo_peers.png").stat().st_size > 0 and "| our PPO, LSTM |" in (out / "ppo_peers.md").read_text()

    # CleanRL ran in its run folder, importing our env module, with the recipe's flags, its schedules held flat.
    started = json.loads((tmp_path / "runs" / "cleanrl_trxl" / "seed1" / "started.json").read_text())
    assert started["cwd"] == str(tmp_path / "runs" / "cleanrl_trxl" / "seed1")
    flags_given = started["flags"]
    recipe = ppo_peers.QUICK_RECIPE
    assert flags_given["--env_id"] == ENV and flags_given["--seed"] == "1" and flags_given["--total_timesteps"] == "4096"
    assert flags_given["--num_steps"] == str(recipe["rollout"]) and flags_given["--trxl_memory_length"] == str(recipe["memory"])
    assert flags_given["--init_lr"] == flags_given["--final_lr"] == str(recipe["lr"])
    assert flags_given["--no-cuda"] is True

    # The same command again trains nothing: every run has its record.
    logs = {log: log.read_text() for log in (tmp_path / "runs").glob("*/seed*/train.log")}
    again = run_experiment(*flags)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(logs) == 6 and all(log.read_text() == text for log, text in logs.items())
    assert json.loads((out / "ppo_peers.json").read_text())["agents"]["lstm"]["per_seed"] == summary["agents"]["lstm"]["per_seed"]


def test_a_missing_cleanrl_environment_is_named_with_the_script_that_makes_it(tmp_path):
    result = run_experiment("--cleanrl", str(tmp_path / "nowhere"), "--runs-dir", str(tmp_path / "runs"))
    assert result.returncode == 2
    assert f"--cleanrl {tmp_path / 'nowhere'}: no CleanRL environment there; make it with scripts/cleanrl_peer.sh" in result.stderr


def test_the_cleanrl_launcher_refuses_a_missing_script(tmp_path):
    result = subprocess.run([sys.executable, "-m", "experiments.peer_cleanrl", "--python", sys.executable, "--script",
                             str(tmp_path / "ppo_trxl.py"), "--run-dir", str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and f"--script {tmp_path / 'ppo_trxl.py'}: no such file" in result.stderr


def test_recurrent_ppo_refuses_minibatches_that_do_not_divide_the_rollout(tmp_path):
    result = subprocess.run([sys.executable, "-m", "experiments.peer_sb3", "--env", ENV, "--frames", "100", "--run-dir", str(tmp_path),
                             "--num-envs", "3", "--rollout", "5", "--num-minibatches", "2"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 2 and "--num-minibatches 2 must divide num_envs x rollout = 15" in result.stderr


def test_the_cached_memory_agent_is_the_feedback_agent_learning_as_ppo_trxl_does():
    """feedback_cached: the feedback agent's flags, and --learner cached_memory, which train_ppo.py
    takes (the config resolves) against the same peer."""
    from agents.command_line import make_parser
    from agents.config.a2c_config import resolve_config
    from agents.config.config_cli import given_fields
    from agents.learners.ppo import PPOTrainer

    feedback = ppo_peers.ours_args("feedback", ENV, 0, ppo_peers.RECIPE)
    cached = ppo_peers.ours_args("feedback_cached", ENV, 0, ppo_peers.RECIPE)
    assert cached == [*feedback, "--learner", "cached_memory"]
    config = resolve_config(given_fields(make_parser(PPOTrainer, "").parse_args(cached), PPOTrainer.config_class), PPOTrainer.config_class)
    assert (config.core, config.learner) == ("feedback", "cached_memory")
    assert ppo_peers.PEER_OF["feedback_cached"] == "cleanrl_trxl"
