"""The experiments' measuring tools: the run-time estimate and the corridor's cue memory probe."""

import pytest
import torch
from gymnasium.spaces import MultiDiscrete

from agents.config.a2c_config import A2CConfig
from agents.learners.train import build_policy
from experiments.frame import estimate
from experiments.cue_memory import cue_separation, door_outputs, walk_to_doors
from experiments.frame.jobs import train_job
from tests.experiments.cue_bounds import MEMORY_ABOVE, NO_MEMORY_BELOW

CORRIDOR = {"length": 5, "max_episode_steps": 20}
TINY = ["--env", "corridor", "--env-opt", "length=5", "--core", "mlp", "--core-opt", "hidden_size=8", "--num-envs", "4", "--rollout", "4"]


def test_model_key_drops_only_the_seed():
    assert estimate.model_key(["--env", "maze", "--seed", "3", "--core", "lstm"]) == ("--env", "maze", "--core", "lstm")


def test_expected_time_times_each_model_once_and_skips_finished_runs(tmp_path, monkeypatch):
    timed = []
    monkeypatch.setattr(estimate, "seconds_per_frame", lambda args, program: timed.append(args) or (1e-3 if "mlp" in args else 4e-3))
    jobs = [train_job(f"{core}{seed}", tmp_path / f"{core}{seed}", [*TINY[:5], core, "--seed", str(seed)], 1000)
            for core in ("mlp", "lstm") for seed in range(3)]
    (tmp_path / "lstm2").mkdir()
    jobs[-1].record.write_text('{"target": "1000 frames"}')  # finished: not counted
    seconds, models = estimate.expected_seconds(jobs, workers=2)
    assert models == 2 and len(timed) == 2
    assert seconds == pytest.approx((3 * 1.0 + 2 * 4.0) / 2)  # 5 runs left, 2 at a time
    assert estimate.expected_seconds(jobs[-2:], workers=8) == (pytest.approx(4.0), 1)  # never below the longest run


def test_seconds_per_frame_measures_a_real_update():
    rate = estimate.seconds_per_frame([*TINY, "--seed", "0"])
    assert 0 < rate < 1.0  # 16 frames of a tiny MLP take well under 16 s anywhere


def test_the_timed_update_comes_after_the_gradient_window_is_full(monkeypatch):
    """--bptt 16 with rollouts of 4: the window holds 12 stored steps after 3 updates, so the 4th
    is timed (one timed after a single warm-up would leave out most of the window's cost)."""
    calls = []
    assert estimate.timed_update(lambda: calls.append(1), warmups=3) >= 0 and len(calls) == 4
    timed = []
    original = estimate.timed_update
    monkeypatch.setattr(estimate, "timed_update", lambda update, warmups=1: timed.append(warmups) or original(update, warmups))
    estimate.seconds_per_frame([*TINY, "--core", "lstm", "--bptt", "16", "--seed", "0"])
    estimate.seconds_per_frame([*TINY, "--seed", "0"])
    assert timed == [3, 1]


def test_a_dqn_frame_is_timed_on_an_update_that_learns(monkeypatch):
    """train_dqn.py's update learns once its replay holds an episode (T-maze of length 6: 7 steps,
    rollouts of 4, so from the second update, which stores the first): the warm-up and the timed
    update after it take optimiser steps, whatever --learning-starts says (a timed update that
    only acts would say too little)."""
    from agents.learners.dqn.trainer import DQNTrainer

    steps = []
    learn_step = DQNTrainer.learn_step
    monkeypatch.setattr(DQNTrainer, "learn_step", lambda self: steps.append(self.updates) or learn_step(self))
    args = ["--env", "tmaze", "--env-opt", "length=6", "--core", "lstm", "--core-opt", "hidden_size=8", "--num-envs", "4",
            "--rollout", "4", "--batch-size", "2", "--learning-starts", "100000", "--seed", "0"]
    rate = estimate.seconds_per_frame(args, "train_dqn")
    assert 0 < rate < 1.0
    # update 0 acts alone; 1 stores an episode and learns, then 2 (the warm-up) and 3 (timed): 16 frames each at
    # 0.25 optimiser steps a frame, 4 steps
    assert steps == [1] * 4 + [2] * 4 + [3] * 4


def test_seconds_per_update_times_a_real_seqtasks_update_quietly(capsys):
    rate = estimate.seconds_per_update(["--task", "random_walk", "--core", "lstm", "--grid-size", "3", "--walk-length", "4",
                                        "--d-model", "8", "--batch-size", "4", "--bptt", "4", "--n-train", "8",
                                        "--n-valid", "4", "--n-test", "4", "--seed", "0"])
    assert 0 < rate < 5.0  # a 4-step block of an 8-wide LSTM
    assert capsys.readouterr().err == ""  # the resolved config is not printed for a timing


def policy(core: str, **core_options):
    torch.manual_seed(0)
    config = A2CConfig(env="corridor", core=core, core_options=core_options, env_options=CORRIDOR)
    return build_policy(config, MultiDiscrete([3, 3, 3]), 4).eval()


def test_door_outputs_are_taken_where_the_doors_come_into_view():
    walk = walk_to_doors(CORRIDOR, episodes=16)
    assert walk.obs.shape == (5, 16, 3)  # the start cell, then 4 steps forward to the last cell
    assert (walk.obs[:-1, :, 1:] == 0).all() and (walk.obs[-1, :, 1:] != 0).all()  # doors seen only at the end
    assert (walk.obs[1:, :, 0] == 0).all() and (walk.obs[0, :, 0] == walk.cue).all()  # the cue only at the start
    assert {1, 2} <= set(walk.cue) and {1, 2} <= set(walk.group)  # both cues and orders drawn (env seeds fixed)
    assert set(walk.correct[walk.cue == walk.group]) == {2} and set(walk.correct[walk.cue != walk.group]) == {3}  # enter upper / lower
    assert door_outputs(policy("lstm", hidden_size=8), walk).shape == (16, 8)


def test_cue_separation_with_fixed_doors_uses_the_one_order():
    """With doors fixed only one order is drawn; the separation is still a number, and as before."""
    fixed = {**CORRIDOR, "doors": "fixed"}
    assert set(walk_to_doors(fixed, episodes=16).group) == {1}
    assert cue_separation(policy("lstm"), fixed) > MEMORY_ABOVE
    assert cue_separation(policy("mlp"), fixed) < NO_MEMORY_BELOW


def test_cue_separation_is_zero_without_memory_and_not_with_it():
    """An MLP sees only the doors when it reaches them: nothing of the cue (float32 noise only).
    A fresh LSTM still carries some of it 4 steps on; a span-8 Transformer attends to it."""
    assert cue_separation(policy("mlp"), CORRIDOR) < NO_MEMORY_BELOW
    assert cue_separation(policy("lstm"), CORRIDOR) > MEMORY_ABOVE
    assert cue_separation(policy("transformer", span=8, d_model=16, n_heads=2), CORRIDOR) > MEMORY_ABOVE
    assert cue_separation(policy("transformer", span=1, d_model=16, n_heads=2), CORRIDOR) < NO_MEMORY_BELOW  # reach 2 of 4 steps
