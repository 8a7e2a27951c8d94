"""Gymnasium API contract of every environment: checker, seeding, pickling, time limit,
native vector env against SyncVectorEnv, bad inputs."""

import os
import pickle
import re
import warnings

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import envs

IDS = sorted(envs.ENV_IDS.values())
LIMITS = {"FeedbackRL/Corridor-v0": 64, "FeedbackRL/Maze-v0": 200, "FeedbackRL/MazeEasy-v0": 200,
          "FeedbackRL/MemoryLength-v0": None, "FeedbackRL/PassiveTMaze-v0": None, "FeedbackRL/WaterMaze-v0": 200}
NAMES = "['corridor', 'maze', 'maze_easy', 'memory_length', 'tmaze', 'water_maze']"
ENDS_ITSELF = ("FeedbackRL/MemoryLength-v0", "FeedbackRL/PassiveTMaze-v0")  # after length + 1 steps


def rollout(env, actions, seed):
    """Observations, rewards and end flags of a single env under a fixed action list."""
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        obs, reward, terminated, truncated, _ = env.step(a)
        out.append((obs, reward, terminated, truncated))
        if terminated or truncated:
            out.append(env.reset()[0])
    return out


def same(a, b):
    """Equality of nested lists and tuples of arrays and scalars."""
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return np.array_equal(a, b)


@pytest.mark.parametrize("env_id", IDS)
def test_registered_with_both_entry_points_and_time_limit(env_id):
    spec = gym.spec(env_id)
    assert spec.entry_point is not None and spec.vector_entry_point is not None
    assert spec.max_episode_steps == LIMITS[env_id]


@pytest.mark.parametrize("env_id", IDS)
def test_env_checker_passes_without_warnings(env_id):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for mode in (None, "rgb_array"):
            env = gym.make(env_id, render_mode=mode).unwrapped
            check_env(env, skip_render_check=mode is None)
            env.close()
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_trajectory_other_seed_differs(env_id):
    actions = np.random.default_rng(0).integers(0, gym.make(env_id).action_space.n, 300).tolist()
    first = rollout(gym.make(env_id), actions, seed=7)
    second = rollout(gym.make(env_id), actions, seed=7)
    other = rollout(gym.make(env_id), actions, seed=8)
    assert same(first, second)
    assert not same(first, other)


@pytest.mark.parametrize("env_id", IDS)
def test_pickle_round_trip_continues_identically(env_id):
    env = gym.make(env_id)
    env.reset(seed=3)
    actions = np.random.default_rng(1).integers(0, env.action_space.n, 150).tolist()
    for a in actions[:50]:
        env.step(a)
    clone = pickle.loads(pickle.dumps(env))
    for a in actions[50:]:
        step, clone_step = env.step(a), clone.step(a)
        assert np.array_equal(step[0], clone_step[0]) and step[1:] == clone_step[1:]
        if step[2] or step[3]:
            assert np.array_equal(env.reset()[0], clone.reset()[0])


@pytest.mark.parametrize("env_id", IDS)
def test_truncates_at_exactly_the_time_limit(env_id):
    """The env's own limit (no TimeLimit wrapper: max_episode_steps=-1) and the vector env's."""
    limit = 13
    # the T-maze and memory length end themselves after length + 1 steps: make that later than the limit
    kwargs = {"length": limit} if env_id in ENDS_ITSELF else {}
    single = gym.make(env_id, max_episode_steps=-1).unwrapped
    single = type(single)(max_episode_steps=limit, **kwargs)
    vector = gym.make_vec(env_id, num_envs=3, max_episode_steps=limit, **kwargs)
    single.reset(seed=0)
    vector.reset(seed=0)
    back = 1  # corridor: "back" at the start cell never ends an episode; other envs never terminate early
    for t in range(1, limit + 1):
        _, _, terminated, truncated, _ = single.step(back)
        _, _, v_terminated, v_truncated, _ = vector.step(np.full(3, back))
        assert not terminated and not v_terminated.any()
        assert truncated == (t == limit)
        assert (v_truncated == (t == limit)).all()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("env_id", IDS)
def test_native_vector_env_equals_sync_vector_env(env_id, mode):
    """Same seeds, same actions: the same observations, rewards, flags and infos, resets included."""
    num_envs, steps = 5, 400
    kwargs = {"max_episode_steps": 40}
    native = gym.make_vec(env_id, num_envs=num_envs, autoreset_mode=mode, **kwargs)
    sync = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, **kwargs)
    assert native.metadata["autoreset_mode"] == mode
    assert native.observation_space == sync.observation_space and native.action_space == sync.action_space
    obs, info = native.reset(seed=11)
    sync_obs, sync_info = sync.reset(seed=11)
    assert np.array_equal(obs, sync_obs)
    assert_infos_equal(info, sync_info)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(steps):
        actions = rng.integers(0, native.single_action_space.n, num_envs)
        result, sync_result = native.step(actions), sync.step(actions)
        for ours, theirs in zip(result[:4], sync_result[:4]):
            assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
        assert_infos_equal(result[4], sync_result[4])
        ended += (result[2] | result[3]).sum()
    assert ended >= num_envs * 2  # the comparison covered autoresets


def assert_infos_equal(ours, theirs):
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        if isinstance(value, dict):
            assert_infos_equal(ours[key], value)
        elif key == "final_obs":
            for a, b in zip(ours[key], value):
                assert (a is None and b is None) or np.array_equal(a, b)
        else:
            assert np.array_equal(ours[key], value), key


@pytest.mark.parametrize("env_id", IDS)
def test_disabled_autoreset_needs_a_partial_reset(env_id):
    env = gym.make_vec(env_id, num_envs=2, autoreset_mode=AutoresetMode.DISABLED, max_episode_steps=3)
    env.reset(seed=0)
    for _ in range(3):
        env.step(np.ones(2, dtype=np.int64))
    with pytest.raises(ResetNeeded, match="reset_mask"):
        env.step(np.ones(2, dtype=np.int64))
    obs, _ = env.reset(options={"reset_mask": np.array([True, True])})
    assert obs.shape == (2, *env.single_observation_space.shape)
    env.step(np.ones(2, dtype=np.int64))


@pytest.mark.filterwarnings("ignore:.*render_mode='ascii'")
@pytest.mark.parametrize("env_id", IDS)
def test_bad_inputs_give_clear_errors(env_id):
    env = gym.make(env_id).unwrapped
    with pytest.raises(ResetNeeded, match="reset"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="not in the action space"):
        env.step(env.action_space.n)
    vector = gym.make_vec(env_id, num_envs=3)
    vector.reset(seed=0)
    with pytest.raises(ValueError, match=r"action -1 is out of range"):
        vector.step(np.array([0, -1, 0]))
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        vector.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1, got 0"):
        gym.make_vec(env_id, num_envs=0)
    with pytest.raises(ValueError, match="max_episode_steps must be an integer >= 1, got 0"):
        gym.make_vec(env_id, num_envs=1, max_episode_steps=0)
    with pytest.raises(ValueError, match="unknown autoreset_mode 'sometimes'"):
        gym.make_vec(env_id, num_envs=1, autoreset_mode="sometimes")
    with pytest.raises(ValueError, match="unknown render_mode 'ascii'"):
        gym.make(env_id, render_mode="ascii")
    with pytest.raises(ValueError, match="seed must be an int, None or a list of 3 seeds"):
        vector.reset(seed=[1, 2])
    for make in (gym.make, lambda env_id, **options: gym.make_vec(env_id, num_envs=2, **options)):
        with pytest.raises(ValueError, match=r"has no option 'lenght'; its options are .*max_episode_steps"):  # a typo, named with the right ones
            make(env_id, lenght=8)


@pytest.mark.parametrize(
    "env_id, kwargs, message",
    [
        ("FeedbackRL/Corridor-v0", {"length": 1}, "length must be an integer >= 2, got 1"),
        ("FeedbackRL/Maze-v0", {"size": 8}, "size must be odd"),
        ("FeedbackRL/Maze-v0", {"size": 3}, r"size must be an integer >= 5, got 3"),
        ("FeedbackRL/Maze-v0", {"num_objects": 9}, r"num_objects must be an integer in \[2, 8\], got 9"),
        ("FeedbackRL/MazeEasy-v0", {"size": 5, "num_objects": 7}, r"num_objects must be an integer in \[2, 6\], got 7"),
        ("FeedbackRL/WaterMaze-v0", {"size": 1.5}, "size must be an integer >= 2, got 1.5"),
        ("FeedbackRL/PassiveTMaze-v0", {"length": 0}, "length must be an integer >= 1, got 0"),
        ("FeedbackRL/MemoryLength-v0", {"bits": 0}, "bits must be an integer >= 1, got 0"),
    ],
)
def test_bad_constructor_arguments_are_named(env_id, kwargs, message):
    with pytest.raises(ValueError, match=message):
        gym.make(env_id, **kwargs)


def test_env_id_accepts_short_names_and_ids_and_rejects_others():
    assert envs.env_id("maze") == "FeedbackRL/Maze-v0"
    assert envs.env_id("FeedbackRL/WaterMaze-v0") == "FeedbackRL/WaterMaze-v0"
    with pytest.raises(ValueError, match=re.escape(f"unknown env 'mase'; choose from {NAMES}")):
        envs.env_id("mase")


def test_env_id_takes_any_registered_id_and_the_module_form():
    assert envs.env_id("CartPole-v1") == "CartPole-v1"
    assert envs.env_id("gymnasium.envs.classic_control:CartPole-v1") == "gymnasium.envs.classic_control:CartPole-v1"
    assert envs.is_native("corridor") and envs.is_native("FeedbackRL/Maze-v0") and not envs.is_native("CartPole-v1")
    assert envs.short_name("FeedbackRL/Maze-v0") == "maze" and envs.short_name("minigrid:MiniGrid-Empty-5x5-v0") == "minigrid-MiniGrid-Empty-5x5-v0"
    with pytest.raises(ValueError, match="env 'nowhere:X-v0': cannot import module 'nowhere'"):
        envs.env_id("nowhere:X-v0")
    with pytest.raises(ValueError, match="unknown env 'gymnasium:Nope-v0'"):
        envs.env_id("gymnasium:Nope-v0")


@pytest.mark.parametrize(
    "name, hint",
    [
        ("Taxi-v3", "Please use `Taxi-v4` instead."),  # renamed in Gymnasium 1.4
        ("CartPole-v9", "It provides versioned environments: [ `v0`, `v1` ]."),
        ("CartPol-v1", "Did you mean: `CartPole`?"),
    ],
)
def test_env_id_passes_on_gymnasiums_hint_beside_our_choices(name, hint):
    with pytest.raises(ValueError) as error:
        envs.env_id(name)
    message = str(error.value)
    assert message.startswith(f"unknown env {name!r}; choose from {NAMES}")
    assert message.endswith(hint)
