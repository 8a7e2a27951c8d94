"""Memory length (bsuite's memory_len / memory_size): what the agent sees when, the reward on the
last step only, episode length, the oracle and random baselines, the native vector env against
SyncVectorEnv, the checker, rendering, and bad options."""

import os
import re

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import gymnasium as gym
import numpy as np
import pygame
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st

import envs  # noqa: F401  (registers the ids)
from envs.baselines import evaluate_baseline
from envs.scene import GOAL, GREEN, OBJECT, RED
from tests.envs.test_api import assert_infos_equal

MEMORY = "FeedbackRL/MemoryLength-v0"


def expected_obs(t, length, context, query, show_time=True):
    """The observation after t steps, restated from the docstring."""
    time = [max(length - t, 0)] if show_time else []
    return time + [query + 1 if t == length else 0] + [1 + bit if t == 0 else 0 for bit in context]


@settings(derandomize=True, max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), length=st.integers(1, 12), bits=st.integers(1, 6), show_time=st.booleans(),
       actions=st.lists(st.integers(0, 1), min_size=13, max_size=13))
def test_context_at_the_start_query_at_the_last_decision_reward_on_the_last_step_only(seed, length, bits, show_time, actions):
    env = gym.make(MEMORY, length=length, bits=bits, show_time=show_time)
    obs, info = env.reset(seed=seed)
    hidden = env.unwrapped.hidden_state()
    context, query = hidden["context"], hidden["query"]
    assert set(context) <= {0, 1} and 0 <= query < bits
    assert obs.tolist() == expected_obs(0, length, context, query, show_time) and info == {"success": False}
    for t, action in enumerate(actions[: length + 1], start=1):
        obs, reward, terminated, truncated, info = env.step(action)
        last = t == length + 1
        right = action == context[query]
        assert obs.tolist() == expected_obs(t, length, context, query, show_time)
        assert reward == ((1.0 if right else -1.0) if last else 0.0)
        assert (terminated, truncated) == (last, False)
        assert info == {"success": last and right}


def test_only_the_last_action_counts():
    env = gym.make(MEMORY, length=3, bits=2)
    env.reset(seed=5)
    hidden = env.unwrapped.hidden_state()
    answer = hidden["context"][hidden["query"]]
    rewards = [env.step(1 - answer)[1] for _ in range(3)] + [env.step(answer)[1]]
    assert rewards == [0.0, 0.0, 0.0, 1.0]


def test_bits_and_queries_are_fair_coins_and_dice_by_the_seed():
    env = gym.make(MEMORY, bits=4).unwrapped
    contexts, queries = [], []
    for seed in range(400):
        env.reset(seed=seed)
        contexts.append(env.hidden_state()["context"])
        queries.append(env.hidden_state()["query"])
    ones = np.mean(contexts, axis=0)  # (4,): each bit is 1 about half the time
    assert (np.abs(ones - 0.5) < 4 * 0.5 / np.sqrt(400)).all()
    counts = np.bincount(queries, minlength=4)  # each index about 100 times
    assert (np.abs(counts - 100) < 4 * np.sqrt(400 * 0.25 * 0.75)).all()


@pytest.mark.parametrize("length, bits", [(1, 1), (10, 1), (5, 8), (100, 3)])
def test_oracle_gets_one_every_episode_in_length_plus_one_steps(length, bits):
    oracle = evaluate_baseline("memory_length", "oracle", episodes=24, seed=0, num_envs=4, length=length, bits=bits)
    assert (oracle["return"] == 1.0).all() and (oracle["success"] == 1.0).all()
    assert (oracle["length"] == length + 1).all()


def test_a_random_policy_gets_zero_on_average():
    """A return is +1 or -1 with probability 1/2 each: the mean of n has standard deviation 1/sqrt(n)."""
    n = 4000
    random = evaluate_baseline("memory_length", "random", episodes=n, seed=0, num_envs=50, length=3, bits=2)
    assert set(random["return"]) == {-1.0, 1.0} and (random["length"] == 4).all()
    assert abs(random["return"].mean()) < 4 / np.sqrt(n)
    assert abs(random["success"].mean() - 0.5) < 4 * 0.5 / np.sqrt(n)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_native_vector_env_equals_sync_vector_env_with_options(mode):
    options = {"length": 2, "bits": 3, "show_time": False}
    native = gym.make_vec(MEMORY, num_envs=4, autoreset_mode=mode, **options)
    sync = gym.make_vec(MEMORY, num_envs=4, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, **options)
    assert native.observation_space == sync.observation_space
    assert np.array_equal(native.reset(seed=3)[0], sync.reset(seed=3)[0])
    rng = np.random.default_rng(0)
    for _ in range(30):  # ten episodes each
        actions = rng.integers(0, 2, 4)
        ours, theirs = native.step(actions), sync.step(actions)
        for a, b in zip(ours[:4], theirs[:4]):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert_infos_equal(ours[4], theirs[4])


@pytest.mark.parametrize("options", [{}, {"length": 1, "bits": 5}, {"length": 40, "show_time": False}])
def test_env_checker_passes(options):
    for mode in (None, "rgb_array"):
        env = gym.make(MEMORY, render_mode=mode, **options).unwrapped
        check_env(env, skip_render_check=mode is None)
        env.close()


def test_no_time_limit_length_sets_the_episode_through_make_and_make_vec():
    env = gym.make(MEMORY, length=50)
    env.reset(seed=0)
    assert [env.step(0)[2] for _ in range(51)] == [False] * 50 + [True]
    assert env.unwrapped.rules.longest_episode == 51
    vector = gym.make_vec(MEMORY, num_envs=2, length=50)
    vector.reset(seed=0)
    assert [vector.step(np.zeros(2, dtype=np.int64))[2].all() for _ in range(51)] == [False] * 50 + [True]


def test_the_scene_shows_the_context_the_query_and_the_step():
    env = gym.make(MEMORY, length=2, bits=6, render_mode="rgb_array").unwrapped
    env.reset(seed=1)
    hidden = env.hidden_state()
    scene = env.rules.scene(0)
    assert scene.tiles.shape == (5, 8)  # 6 bits + two walls, wider than the 4-cell track
    assert scene.tiles[1, 1:7].tolist() == [OBJECT + (GREEN if bit else RED) for bit in hidden["context"]]
    assert np.flatnonzero(scene.tiles[2] == GOAL).tolist() == [1 + hidden["query"]]
    assert set(scene.view) == {scene.agent} | {(1, 1 + b) for b in range(6)}  # the context, seen at t = 0
    env.step(0)
    assert env.rules.scene(0).view == [(3, 2)]  # the agent's cell, a step on
    env.step(0)
    assert env.rules.scene(0).view == [(3, 3), (2, 1 + hidden["query"])]  # the query, seen at t = L
    assert env.render().shape == (5 * 32 + 48, 8 * 32, 3)


def test_a_long_episode_renders_shortened_and_human_mode_draws_headless():
    env = gym.make(MEMORY, length=1000, render_mode="rgb_array").unwrapped
    env.reset(seed=0)
    assert env.render().shape == (5 * 32 + 48, 34 * 32, 3)  # a 32-column track + two walls
    human = gym.make(MEMORY, length=3, render_mode="human")
    human.reset(seed=0)
    human.step(1)
    twin = gym.make(MEMORY, length=3, render_mode="rgb_array")
    twin.reset(seed=0)
    twin.step(1)
    shown = pygame.surfarray.array3d(pygame.display.get_surface()).transpose(1, 0, 2)
    np.testing.assert_array_equal(shown, twin.render())
    human.close()


@pytest.mark.parametrize("options, message", [
    ({"length": 0}, "length must be an integer >= 1, got 0"),
    ({"bits": 0}, "bits must be an integer >= 1, got 0"),
    ({"bits": 2.5}, "bits must be an integer >= 1, got 2.5"),
    ({"show_time": "no"}, "show_time must be True or False, got 'no'"),
    ({"show_time": 1}, "show_time must be True or False, got 1"),
])
def test_bad_options_are_refused_naming_the_value(options, message):
    for make in (gym.make, lambda env_id, **kwargs: gym.make_vec(env_id, num_envs=2, **kwargs)):
        with pytest.raises(ValueError, match=re.escape(message)):
            make(MEMORY, **options)
