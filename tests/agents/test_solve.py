"""The trainers' solve check (agents/learners/solve.py): a run that solves stops and records it, one
that does not is censored at its cap, checking changes no update, and the record survives kill -9
and resume."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import train_a2c
from agents.config.a2c_config import A2CConfig, resolve_config
from agents.learners.ppo import PPOTrainer
from agents.learners.solve import CHECK_SEED, CONFIRM_SEED, SolveCheck
from agents.learners.train import Trainer
from agents.config.ppo_config import PPOConfig
from tests.launch import wait_until
from tests.trained import assert_same_parameters

RECALL = {"length": 2, "show_time": False}
NEVER = {"solve_at": 2.0, "solve_metric": "return"}  # every recall episode returns +1 or -1: checked, never solved, whatever is learnt


def recall_config(tmp_path, updates=6, config_class=A2CConfig, **fields):
    given = dict(env="memory_length", core="lstm", num_envs=4, rollout=8, total_steps=updates * 4 * 8, seed=1, run_dir=str(tmp_path),
                 core_options={"hidden_size": 16}, env_options=RECALL, threads=1, previous_inputs=False, eval_every=32, eval_episodes=8)
    return resolve_config({**given, **fields}, config_class)


def record(run_dir) -> dict:
    return json.loads((run_dir / "solve.json").read_text())


def test_a_run_that_solves_stops_at_its_first_confirmed_check_and_records_it(tmp_path):
    # Every recall episode returns +1 or -1, so a mean return >= -1 solves at the first check.
    trainer = Trainer(recall_config(tmp_path, updates=20, solve_at=-1.0, solve_metric="return", eval_every=64))
    try:
        trainer.train()
    finally:
        trainer.close()
    assert trainer.global_step == 64 and trainer.updates == 2  # stopped at the check, 18 updates early
    solve = record(tmp_path)
    assert solve["solved"] and solve["censored_at"] is None
    assert (solve["frames_to_solve"], solve["frames_trained"]) == (64, 64)
    assert solve["episodes_to_solve"] == trainer.episodes == 16  # 4 envs x 16 steps: 3 an episode, and the autoreset step
    assert solve["checks"][0]["confirmation"] >= -1 and 0 <= solve["seconds_to_solve"] <= solve["seconds"]
    resumed = Trainer.from_checkpoint(str(tmp_path), {"total_steps": 20 * 32})  # a solved run trains no further
    try:
        resumed.train()
    finally:
        resumed.close()
    assert resumed.global_step == 64 and record(tmp_path)["frames_to_solve"] == 64


def test_a_run_unsolved_at_its_cap_is_censored_there_with_a_check_at_the_cap(tmp_path):
    trainer = Trainer(recall_config(tmp_path, updates=5, eval_every=64, **NEVER))
    try:
        trainer.train()
    finally:
        trainer.close()
    solve = record(tmp_path)
    assert not solve["solved"] and solve["frames_to_solve"] is None and solve["censored_at"] == 5 * 32
    assert [check["frames"] for check in solve["checks"]] == [64, 128, 160]  # every 64 frames, and at the cap
    assert all(-1 <= check["score"] <= 1 for check in solve["checks"])


@pytest.mark.parametrize("trainer_class", [Trainer, PPOTrainer])
def test_checking_changes_no_update(tmp_path, trainer_class):
    # Scoring reseeds the global generators to play its episodes; restored after, so sampling goes on as without checks.
    extra = {"num_minibatches": 2} if trainer_class is PPOTrainer else {}

    def parameters(folder, **fields):
        trainer = trainer_class(recall_config(tmp_path / folder, config_class=trainer_class.config_class, **fields, **extra))
        try:
            trainer.train()
        finally:
            trainer.close()
        return trainer.policy.state_dict()

    plain = parameters("plain")
    checked = parameters("checked", eval_every=32, **NEVER)
    assert_same_parameters(plain, checked)
    assert len(record(tmp_path / "checked")["checks"]) == 6


def test_a_confirmation_that_falls_short_keeps_training():
    scores = iter([0.96, 0.90, 0.97, 0.99])  # check, its confirmation, check, its confirmation
    seeds = []

    def play(seed):
        seeds.append(seed)
        return {"success": np.array([next(scores)])}

    check = SolveCheck(0.95, "success", every=10, growth=0.0, episodes=1)
    assert not check.add(check.score(play, 10, 3))
    assert check.due(20, 100) and not check.due(19, 100)
    assert check.add(check.score(play, 20, 6))
    assert seeds == [CHECK_SEED, CONFIRM_SEED] * 2
    solve = check.record(20, 100)
    assert solve["frames_to_solve"] == 20 and solve["episodes_to_solve"] == 6 and len(solve["checks"]) == 2
    assert not check.due(30, 100)  # solved: no more checks


@settings(max_examples=50, deadline=None)
@given(every=st.integers(1, 10_000), growth=st.floats(0, 2), update=st.integers(1, 5_000), cap=st.integers(1, 200_000))
def test_checks_come_at_least_every_frames_and_growth_apart_and_at_the_cap(every, growth, update, cap):
    check = SolveCheck(2.0, "success", every, growth, episodes=1)  # never solved
    checked, frames = [], 0
    while frames < cap:
        frames = min(frames + update, cap)
        if check.due(frames, cap):
            check.add({"frames": frames, "episodes": 0, "seconds": 0.0, "score": 0.0})
            checked.append(frames)
    assert checked[-1] == cap
    for start, end in zip([0, *checked[:-1]], checked[:-1]):  # the cap's check may come sooner
        assert end - start >= max(every, growth * start)


@pytest.mark.parametrize("fields, named", [
    ({"solve_at": float("nan")}, "solve_at"), ({"solve_at": 1.5}, "solve_at"), ({"solve_at": 0.0}, "solve_at"),
    ({"eval_every": 0}, "eval_every"), ({"eval_episodes": 0}, "eval_episodes"), ({"eval_growth": -0.1}, "eval_growth"),
    ({"solve_metric": ""}, "solve_metric"),
])
def test_bad_solve_settings_are_refused_by_name(tmp_path, fields, named):
    with pytest.raises(ValueError, match=named):
        recall_config(tmp_path, **fields)


def test_a_metric_the_env_does_not_report_is_named_at_the_first_check(tmp_path):
    trainer = Trainer(recall_config(tmp_path, solve_at=1.0, solve_metric="sucess"))
    try:
        with pytest.raises(ValueError, match="'sucess'.*'success'"):
            trainer.train()
    finally:
        trainer.close()


def test_the_record_survives_kill_9_and_resume(tmp_path):
    # Episode lengths are always 3, so --solve-metric length never reaches 100: a check every 10 updates to the cap.
    def argv(run_dir, total):
        return ["--env", "memory_length", "--env-opt", "length=2,show_time=false", "--core", "lstm", "--core-opt", "hidden_size=16",
                "--num-envs", "4", "--rollout", "8", "--total-steps", str(total), "--solve-at", "100", "--solve-metric", "length",
                "--eval-every", "320", "--eval-episodes", "4", "--threads", "1", "--seed", "2", "--no-previous-inputs",
                "--save-every", "0.001", "--run-dir", str(run_dir)]

    total = 32 * 200  # 20 checks: the kill comes after 5
    train_a2c.main(argv(tmp_path / "straight", total))
    killed = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "train_a2c.py", *argv(killed, total)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def checks_recorded() -> bool:  # a few checks recorded, a checkpoint behind them
        solve = killed / "solve.json"
        return solve.exists() and (killed / "checkpoint.pt").exists() and len(json.loads(solve.read_text() or "{}").get("checks", [])) >= 5

    try:
        if wait_until(checks_recorded, process):  # looked at every POLL_SECONDS, not in a loop that takes a core from the run
            os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL, "the run ended before it was killed; give it more frames"
    train_a2c.main(["--resume", str(killed)])
    kept = ("frames", "episodes", "score")
    straight, resumed = record(tmp_path / "straight"), record(killed)
    assert [{k: c[k] for k in kept} for c in resumed["checks"]] == [{k: c[k] for k in kept} for c in straight["checks"]]
    assert len(straight["checks"]) == 20 and resumed["censored_at"] == straight["censored_at"] == total
