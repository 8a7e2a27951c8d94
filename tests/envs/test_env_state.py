"""Our vector envs save their whole state as numpy arrays and numbers (what a checkpoint may
hold: agents/runtime/checkpoint.py) and continue from it bit for bit; a state that does not fit is
refused by name."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envs


def plain(tree) -> bool:
    """Whether `tree` holds only arrays, numbers, strings, None and containers of them."""
    if isinstance(tree, dict):
        return all(isinstance(key, str) and plain(value) for key, value in tree.items())
    if isinstance(tree, (list, tuple)):
        return all(plain(value) for value in tree)
    return tree is None or isinstance(tree, (np.ndarray, bool, int, float, str))


@pytest.mark.parametrize("env_id", sorted(envs.ENV_IDS.values()))
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), before=st.integers(0, 60))
def test_a_saved_state_continues_bit_for_bit(env_id, seed, before):
    rng = np.random.default_rng(seed)
    env = gym.make_vec(env_id, num_envs=3)
    env.reset(seed=[seed, seed + 1, seed + 2])
    actions = lambda: rng.integers(0, env.single_action_space.n, 3)  # noqa: E731
    for _ in range(before):
        env.step(actions())
    saved = env.get_state()
    assert plain(saved)
    copy = gym.make_vec(env_id, num_envs=3)
    copy.set_state(saved)
    for _ in range(80):  # past episode ends: each env's generator continues too
        chosen = actions()
        for a, b in zip(env.step(chosen)[:4], copy.step(chosen)[:4]):
            assert np.array_equal(a, b)


def test_a_state_of_other_options_or_envs_is_refused_by_name():
    env = gym.make_vec("FeedbackRL/Corridor-v0", num_envs=3, length=4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="the saved env state's episode ends are bool\\[3\\], expected bool\\[2\\]"):
        gym.make_vec("FeedbackRL/Corridor-v0", num_envs=2, length=4).set_state(env.get_state())
    with pytest.raises(ValueError, match="the saved env state holds arrays"):
        gym.make_vec("FeedbackRL/Maze-v0", num_envs=3).set_state(env.get_state())
    saved = env.get_state()
    saved["rules"]["rngs"][0] = {**saved["rules"]["rngs"][0], "bit_generator": "os.system"}
    with pytest.raises(ValueError, match="unknown bit generator 'os.system'"):
        gym.make_vec("FeedbackRL/Corridor-v0", num_envs=3, length=4).set_state(saved)
