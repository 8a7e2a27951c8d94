"""Corridor: what the agent sees where, moves, and the door rewards."""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.corridor import BACK, BLUE_SEEN, ENTER_LOWER, ENTER_UPPER, FORWARD, GREEN_SEEN


def corridor(seed, length=5):
    env = gym.make("FeedbackRL/Corridor-v0", length=length).unwrapped
    obs, info = env.reset(seed=seed)
    return env, obs, info


@pytest.mark.parametrize("seed", range(6))
def test_cue_only_at_start_doors_only_at_end(seed):
    env, obs, info = corridor(seed)
    state = env.hidden_state()
    assert obs.tolist() == [state["cue"], 0, 0] and info == {"success": False}
    assert {state["upper_door"], state["lower_door"]} == {BLUE_SEEN, GREEN_SEEN}
    for _ in range(3):
        obs, reward, terminated, _, _ = env.step(FORWARD)
        assert obs.tolist() == [0, 0, 0] and reward == 0 and not terminated
    obs, *_ = env.step(FORWARD)
    assert obs.tolist() == [0, state["upper_door"], state["lower_door"]]
    obs, *_ = env.step(FORWARD)  # the far wall: stays at the end
    assert env.hidden_state()["position"] == 4
    for _ in range(6):
        obs, *_ = env.step(BACK)
    assert env.hidden_state()["position"] == 0 and obs.tolist() == [state["cue"], 0, 0]


def test_door_actions_do_nothing_before_the_end():
    env, obs, _ = corridor(0)
    for action in (ENTER_UPPER, ENTER_LOWER):
        next_obs, reward, terminated, truncated, _ = env.step(action)
        assert np.array_equal(next_obs, obs) and reward == 0 and not terminated and not truncated
        assert env.hidden_state()["position"] == 0


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("matching", [True, False])
def test_matching_door_pays_one_other_door_pays_nothing_both_end(seed, matching):
    env, _, _ = corridor(seed)
    state = env.hidden_state()
    for _ in range(4):
        env.step(FORWARD)
    upper_matches = state["upper_door"] == state["cue"]
    action = ENTER_UPPER if upper_matches == matching else ENTER_LOWER
    _, reward, terminated, truncated, info = env.step(action)
    assert reward == (1.0 if matching else 0.0)
    assert terminated and not truncated
    assert info == {"success": matching}


def test_cue_and_door_order_are_both_random():
    seen = {tuple(corridor(seed)[0].hidden_state().values())[1:3] for seed in range(40)}
    assert seen == {(c, u) for c in (BLUE_SEEN, GREEN_SEEN) for u in (BLUE_SEEN, GREEN_SEEN)}


def test_default_time_limit_is_four_times_length():
    env = gym.make("FeedbackRL/Corridor-v0", length=10, max_episode_steps=-1).unwrapped
    env.reset(seed=0)
    assert env.rules.max_episode_steps == 40
