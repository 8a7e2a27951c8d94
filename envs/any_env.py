"""Any registered Gymnasium env as a vector env with the autoreset mode its user needs.

Our envs are made through their native batched env, which takes `autoreset_mode` as a keyword;
any other id through `gymnasium.make_vec` in sync mode, the mode asked of the vector env itself
(`vector_kwargs`), since an env's own constructor knows nothing of it. Either way the result is
checked to autoreset as asked. `metric_keys` picks the info entries that are episode metrics;
`render_modes` says how an env can be drawn.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

import envs


def make_vector_env(name: str, num_envs: int, autoreset_mode: AutoresetMode, **env_kwargs: Any) -> gym.vector.VectorEnv:
    """`num_envs` envs of `name` (short name, id or module:EnvId) autoresetting with `autoreset_mode`."""
    env_id = envs.env_id(name)
    if envs.is_native(name):
        return gym.make_vec(env_id, num_envs=num_envs, autoreset_mode=autoreset_mode, **env_kwargs)
    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync", vector_kwargs={"autoreset_mode": autoreset_mode}, **env_kwargs)
    mode = env.metadata.get("autoreset_mode")
    if mode != autoreset_mode:
        env.close()
        raise ValueError(f"env {name!r}: its vector env autoresets with {mode!r}, not {autoreset_mode!r} as asked")
    return env


def render_modes(name: str, **env_kwargs: Any) -> list[str]:
    """The render modes env `name` declares (asked before making it with one: an env that has
    none may not even take the `render_mode` keyword)."""
    env = gym.make(envs.env_id(name), **env_kwargs)
    try:
        return list(env.metadata.get("render_modes", []))
    finally:
        env.close()


def metric_keys(info: dict[str, Any], num_envs: int) -> list[str]:
    """The keys of a vector env's info that hold one number per env (success, targets_reached...), sorted."""
    return sorted(
        key for key, value in info.items()
        if not key.startswith("_") and isinstance(value, np.ndarray) and value.shape == (num_envs,) and value.dtype.kind in "biuf"
    )


def metric_values(info: dict[str, Any], key: str, num_envs: int) -> np.ndarray:
    """(num_envs,) float values of metric `key`, NaN where an env did not report it."""
    if key not in info:
        return np.full(num_envs, np.nan)
    return np.where(info.get("_" + key, True), info[key], np.nan)
