"""Properties over random action sequences and seeds, for every environment."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envs
from envs.maze import CELL_WALL

IDS = sorted(envs.ENV_IDS.values())
REWARDS = {"FeedbackRL/PassiveTMaze-v0": {0.0, 1.0, -1 / 10}, "FeedbackRL/MemoryLength-v0": {0.0, 1.0, -1.0}}  # the rest: {0, 1}


@pytest.mark.parametrize("env_id", IDS)
@settings(derandomize=True, max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), actions=st.lists(st.integers(0, 3), min_size=1, max_size=300))
def test_random_actions_keep_the_agent_off_walls_and_observations_in_space(env_id, seed, actions):
    env = gym.make_vec(env_id, num_envs=2, max_episode_steps=60)
    obs, _ = env.reset(seed=seed)
    rules = env.unwrapped.rules
    n = env.single_action_space.n
    for a in actions:
        assert env.observation_space.contains(obs)
        if hasattr(rules, "cells"):
            assert (rules.cells.take(rules._row_start + rules.position) != CELL_WALL).all()
        obs, reward, _, _, _ = env.step(np.array([a % n, (a * 7 + 1) % n]))
        assert set(np.unique(reward)) <= REWARDS.get(env_id, {0.0, 1.0})
    assert env.observation_space.contains(obs)
