"""Corridor: what the agent sees where, moves, the door rewards, and the `doors` option."""

import hashlib
import re

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.baselines import evaluate_baseline
from envs.corridor import BACK, BLUE_SEEN, ENTER_LOWER, ENTER_UPPER, FORWARD, GREEN_SEEN

BEFORE_DOORS_OPTION = "0b4be758c5e70db5fa2198cbe9eb8df325420ad1cd6f0c2427aa7e6fd4305cf6"  # trajectory_digest() at 2542ca6


def corridor(seed, length=5):
    env = gym.make("FeedbackRL/Corridor-v0", length=length).unwrapped
    obs, info = env.reset(seed=seed)
    return env, obs, info


@pytest.mark.parametrize("seed", range(6))
def test_cue_only_at_start_doors_only_at_end(seed):
    env, obs, info = corridor(seed)
    state = env.hidden_state()
    assert obs.tolist() == [state["cue"], 0, 0] and info == {"success": False, "arrived": False}
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
    assert info == {"success": matching, "arrived": True}  # either door: arrived


def test_cue_and_door_order_are_both_random():
    seen = {tuple(corridor(seed)[0].hidden_state().values())[1:3] for seed in range(40)}
    assert seen == {(c, u) for c in (BLUE_SEEN, GREEN_SEEN) for u in (BLUE_SEEN, GREEN_SEEN)}


def test_default_time_limit_is_four_times_length():
    env = gym.make("FeedbackRL/Corridor-v0", length=10, max_episode_steps=-1).unwrapped
    env.reset(seed=0)
    assert env.rules.max_episode_steps == 40


def door_orders(doors, seeds=range(40), episodes=3):
    """The upper door's colour in the first `episodes` episodes of each seed."""
    env = gym.make("FeedbackRL/Corridor-v0", doors=doors).unwrapped
    orders = []
    for seed in seeds:
        env.reset(seed=seed)
        for _ in range(episodes):
            orders.append(env.hidden_state()["upper_door"])
            env.reset()
    return orders


def test_fixed_doors_put_blue_on_top_in_every_episode_random_doors_do_not():
    assert set(door_orders("fixed")) == {BLUE_SEEN}
    assert set(door_orders("random")) == {BLUE_SEEN, GREEN_SEEN}


def test_fixed_doors_keep_the_cues_of_the_same_seed():
    """Both settings draw the same uniforms per episode: the cue stream does not shift."""
    cues = {}
    for doors in ("random", "fixed"):
        env = gym.make_vec("FeedbackRL/Corridor-v0", num_envs=4, doors=doors)
        env.reset(seed=5)
        cues[doors] = [env.hidden_state(i)["cue"] for i in range(4)]
    assert cues["random"] == cues["fixed"]


def test_oracle_succeeds_with_either_door_setting():
    for doors in ("random", "fixed"):
        oracle = evaluate_baseline("corridor", "oracle", episodes=12, seed=1, num_envs=4, doors=doors)
        assert oracle["success"].mean() == 1.0


def trajectory_digest(**kwargs):
    """A sha256 over 2,000 seeded random steps of 8 corridors of length 6."""
    env = gym.make_vec("FeedbackRL/Corridor-v0", num_envs=8, length=6, **kwargs)
    obs, _ = env.reset(seed=3)
    digest = hashlib.sha256(obs.tobytes())
    rng = np.random.default_rng(0)
    for _ in range(2000):
        obs, reward, terminated, truncated, _ = env.step(rng.integers(0, 4, 8))
        digest.update(obs.tobytes() + reward.tobytes() + terminated.tobytes() + truncated.tobytes())
    return digest.hexdigest()


def test_default_doors_are_random_and_unchanged_bit_for_bit():
    """The digest was taken before the `doors` option existed."""
    assert trajectory_digest() == trajectory_digest(doors="random") == BEFORE_DOORS_OPTION
    assert trajectory_digest(doors="fixed") != BEFORE_DOORS_OPTION


@pytest.mark.parametrize("doors", ["Fixed", "shuffled", 1, None])
def test_bad_doors_are_refused_naming_the_value_and_the_choices(doors):
    with pytest.raises(ValueError, match=re.escape(f"doors must be one of ['random', 'fixed'], got {doors!r}")):
        gym.make("FeedbackRL/Corridor-v0", doors=doors)


def test_a_length_1000_corridor_renders_shortened():
    env = gym.make("FeedbackRL/Corridor-v0", length=1000, render_mode="rgb_array").unwrapped
    env.reset(seed=0)
    assert env.render().shape == (3 * 32 + 48, 34 * 32, 3)  # 32 columns of corridor + two walls
    env.rules.position[0] = 999
    assert env.rules.scene(0).agent == (1, 32)
