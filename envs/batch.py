"""The batched episode machinery every environment shares.

An environment writes its rules once, as numpy over a leading `num_envs` axis, by subclassing
`BatchedRules`. The base class owns what all of them need: one random generator per env, the
step counter, and truncation at the time limit. `single.py` wraps a batch of one as a
`gymnasium.Env`; `vector.py` wraps a batch of many as a `gymnasium.vector.VectorEnv`.

Randomness: every random number an episode uses is drawn from that env's own generator in one
block, at reset (`uniforms_per_reset` floats in [0, 1)). Events inside the episode (a new target
colour, a teleport) are the episode's k-th event and take their randomness from a hash of
(episode key, k), the key being one of those uniforms. So stepping needs no per-env Python loop,
the amount drawn per episode does not depend on its length, and env i of a vector env seeded
with `s` follows exactly the trajectory of a single env seeded with `s + i`.

Letters in shape comments: N envs in the batch, K envs being reset, F observation features.
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym
import numpy as np

BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")  # numpy's, by name


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """Return `value` if it is an integer in [low, high], else raise a ValueError naming it."""
    allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer {allowed}, got {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer {allowed}, got {value!r}")
    return int(value)


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """Return `value` if it is one of the strings `allowed`, else raise a ValueError naming it."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
    return value


def episode_key(u: np.ndarray) -> np.ndarray:
    """(K,) uint64 episode keys from (K,) uniforms in [0, 1) (53 random bits each)."""
    return np.floor(u * 2.0**53).astype(np.uint64)


def event_choice(key: np.ndarray, k: np.ndarray, n: int) -> np.ndarray:
    """The k-th event's random integer in [0, n) for episodes with these keys, all (K,).

    splitmix64 of key + k: a well-mixed 64-bit hash, so the choices of one episode look
    independent and uniform (the modulo bias is below 2**-40 for the small n used here).
    """
    z = key + k.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(n)).astype(np.int64)


def generator_from_state(state: dict[str, Any]) -> np.random.Generator:
    """A numpy Generator continuing from `bit_generator.state` (one of numpy's bit generators)."""
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in BIT_GENERATORS:
        raise ValueError(f"unknown bit generator {name!r} in a saved env state; numpy's are {list(BIT_GENERATORS)}")
    bit_generator = getattr(np.random, name)()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def make_rules(rules_class: type, num_envs: int, options: dict[str, Any]) -> "BatchedRules":
    """rules_class(num_envs, **options), an option it does not take refused by name with the
    ones it does (a ValueError, which the command lines turn into a usage error)."""
    accepted = [name for name in inspect.signature(rules_class).parameters if name != "num_envs"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"{rules_class.__name__.removesuffix('Rules').lower()} has no option {', '.join(map(repr, unknown))}; "
                         f"its options are {', '.join(accepted)}")
    return rules_class(num_envs=num_envs, **options)


class BatchedRules:
    """The state and rules of `num_envs` independent episodes of one environment.

    Subclasses set `single_observation_space`, `single_action_space` and `uniforms_per_reset`
    in `__init__`, and implement:
      _new_episodes(idx, u)  start new episodes for envs `idx` (K,) from uniforms u (K, U)
      _act(actions)          apply actions (N,) to every env -> reward (N,) float64, terminated (N,) bool
      observe()              -> observations (N, F) int64
      info()                 -> dict of (N,) arrays, what an evaluator needs
      hidden_state(i)        -> dict, env i's hidden state (tests, probing, oracles)
      scene(i)               -> render.Scene for env i
    """

    single_observation_space: gym.spaces.MultiDiscrete
    single_action_space: gym.spaces.Discrete
    uniforms_per_reset: int

    def __init__(self, num_envs: int, max_episode_steps: int | None):
        """max_episode_steps: the time limit, or None for none (the T-maze's rules end every
        episode themselves, and a limit there would add a truncation its authors did not have)."""
        self.num_envs = check_int("num_envs", num_envs, 1)
        if max_episode_steps is not None:
            max_episode_steps = check_int("max_episode_steps", max_episode_steps, 1)
        self.max_episode_steps = max_episode_steps
        self.rngs: list[np.random.Generator | None] = [None] * self.num_envs
        self.elapsed = np.zeros(self.num_envs, dtype=np.int64)  # (N,) steps in the current episode

    @property
    def longest_episode(self) -> int | None:
        """The most steps an episode can last (None: no bound): the time limit here; rules that
        end every episode sooner say so (the gradient window that follows episodes needs it)."""
        return self.max_episode_steps

    def reset(self, idx: np.ndarray) -> None:
        """Start new episodes in envs `idx`, drawing their randomness from their own generators."""
        u = np.empty((len(idx), self.uniforms_per_reset))  # (K, U)
        for row, i in enumerate(idx):
            u[row] = self.rngs[i].random(self.uniforms_per_reset)
        self.elapsed[idx] = 0
        self._new_episodes(np.asarray(idx), u)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Apply one action per env. Returns reward (N,), terminated (N,), truncated (N,).

        Truncation is at exactly `max_episode_steps` steps, like gymnasium's TimeLimit (which
        also reports truncated=True when the last step happens to terminate); never without one.
        """
        n = self.single_action_space.n
        if actions.shape != (self.num_envs,) or actions.dtype.kind not in "iu":
            raise ValueError(
                f"actions must be an integer array of shape ({self.num_envs},), "
                f"got shape {actions.shape} and dtype {actions.dtype}"
            )
        if actions.min() < 0 or actions.max() >= n:
            bad = actions[(actions < 0) | (actions >= n)][0]
            raise ValueError(f"action {bad} is out of range; actions are integers in [0, {n - 1}]")
        reward, terminated = self._act(actions)
        self.elapsed += 1
        if self.max_episode_steps is None:
            return reward, terminated, np.zeros(self.num_envs, dtype=bool)
        truncated = self.elapsed >= self.max_episode_steps
        return reward, terminated, truncated

    def state_dict(self) -> dict[str, Any]:
        """The episodes' whole state as plain data, for a checkpoint: every numpy array this
        object holds (its rules keep all that changes in arrays) and each env's generator state
        (None where it has none yet)."""
        return {
            "arrays": {name: value.copy() for name, value in vars(self).items() if isinstance(value, np.ndarray)},
            "rngs": [None if rng is None else rng.bit_generator.state for rng in self.rngs],
        }

    def state_bounds(self) -> dict[str, tuple[int, int]]:
        """The values each state array may hold, inclusive (positions within the grid, colours
        among the env's): load_state_dict refuses a saved state outside them, which would index
        past an array mid-training or wrap round to another cell. Rules add their own arrays'."""
        return {"elapsed": (0, self.max_episode_steps if self.max_episode_steps is not None else np.iinfo(np.int64).max)}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Continue from what state_dict returned; a ValueError naming what does not fit (another
        env, other options or another number of envs, a value outside state_bounds)."""
        ours = {name: value for name, value in vars(self).items() if isinstance(value, np.ndarray)}
        arrays = saved["arrays"]
        if set(arrays) != set(ours):
            raise ValueError(f"the saved env state holds arrays {sorted(arrays)}, this env's are {sorted(ours)}")
        for name, value in arrays.items():
            value = np.asarray(value)
            if value.shape != ours[name].shape or value.dtype != ours[name].dtype:
                raise ValueError(f"the saved env state's {name!r} is {value.dtype}{list(value.shape)}, "
                                 f"this env's {ours[name].dtype}{list(ours[name].shape)} (other options or number of envs?)")
        for name, (low, high) in self.state_bounds().items():
            value = np.asarray(arrays[name])
            if value.size and (value.min() < low or value.max() > high):
                bad = value[(value < low) | (value > high)][0]
                raise ValueError(f"the saved env state's {name!r} holds {bad}, outside this env's [{low}, {high}]")
        if len(saved["rngs"]) != self.num_envs:
            raise ValueError(f"the saved env state has {len(saved['rngs'])} generators for {self.num_envs} envs")
        for name, value in arrays.items():
            setattr(self, name, np.array(value, dtype=ours[name].dtype))
        self.rngs = [None if state is None else generator_from_state(state) for state in saved["rngs"]]

    def _new_episodes(self, idx: np.ndarray, u: np.ndarray) -> None:
        raise NotImplementedError

    def _act(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def observe(self) -> np.ndarray:
        raise NotImplementedError

    def info(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def hidden_state(self, i: int) -> dict[str, Any]:
        raise NotImplementedError

    def scene(self, i: int):
        raise NotImplementedError
