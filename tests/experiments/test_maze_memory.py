"""The maze memory probe's book-keeping, checked with the oracle as the agent: it reaches every
target in exactly its fewest steps, so a target counts as reached exactly when that distance is
within the window, whatever was seen; and a probe of a real (untrained) policy counts each target
given early enough once."""

import numpy as np
import pytest
import torch

import experiments.maze_memory as probe
from agents.config.a2c_config import resolve_config
from agents.evaluation import Run, new_policy
from envs.oracle import MazeOracle


class OracleActor:
    """Stands in for agents.learners.rollout.Actor: the same `obs` and `step()` record, oracle actions."""

    def __init__(self, pool, policy, device):
        self.pool, self.oracle = pool, MazeOracle(pool.env.rules)
        self.obs = pool.reset()

    def step(self):
        self.obs, reward, terminated, truncated, _ = self.pool.step(self.oracle())
        return {"reward": reward, "terminated": terminated, "truncated": truncated}, None


def small_run(env: str) -> Run:
    config = resolve_config({"env": env, "core": "lstm", "core_options": {"hidden_size": 8}, "num_envs": 4, "rollout": 4, "seed": 1})
    return Run(config, new_policy(config).eval(), 0)


@pytest.mark.parametrize("env", ["maze", "maze_easy"])
def test_an_oracle_reaches_a_target_exactly_when_its_distance_is_within_the_window(env, monkeypatch):
    monkeypatch.setattr(probe, "Actor", OracleActor)
    outcomes = probe.target_outcomes(small_run(env), episodes=16)
    assert len(outcomes["seen"]) > 16 * 5  # each episode's first target and those after it, up to 150 steps
    np.testing.assert_array_equal(outcomes["reached"], outcomes["distance"] <= probe.WINDOW)
    assert outcomes["seen"].any() and not outcomes["seen"].all()


def test_a_policy_probe_counts_each_early_target_once():
    torch.manual_seed(0)
    outcomes = probe.target_outcomes(small_run("maze"), episodes=8)
    n = len(outcomes["seen"])
    assert n >= 8 and len(outcomes["reached"]) == len(outcomes["distance"]) == n  # at least each first target
    assert (outcomes["distance"] >= 1).all() and (outcomes["distance"] < 200).all()
