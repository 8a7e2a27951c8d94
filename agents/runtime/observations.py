"""Any supported observation space as one flat array per env, so storage need not know the space.

The env pools hand the learner (B, N) arrays whatever the env's space: rollouts stack them,
actor workers share one (B, N) buffer, checkpoints store them; only the encoder (agents/model/encoders)
knows how to take them apart again, in the same order as `flatten` lays them out:
- Discrete: 1 column (the value, start offset kept); MultiDiscrete of any shape and Box: their
  values in C order; Dict: its parts in the space's key order; Tuple: its parts in order;
- Text (or a MiniGrid mission): no columns (skipped, see `skipped_parts`).
The array is int64 where every column is an integer (Discrete, MultiDiscrete), uint8 where every
column is a uint8 Box (images: they cross to the learner device as bytes, a quarter of float32,
and the encoder converts them there), else float32 (exact for integers below 2**24). Anything
else is refused with `UnsupportedSpace`.

This module imports no torch: actor workers use it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

SUPPORTED = "Discrete, MultiDiscrete (any shape), Box, Text (skipped), and Dict or Tuple of those"


class UnsupportedSpace(ValueError):
    """A space the agent cannot take; the message names it and what is supported."""


def is_text(space: gym.Space) -> bool:
    """A text part: gymnasium's Text, or MiniGrid's MissionSpace (a plain Space of strings)."""
    return isinstance(space, gym.spaces.Text) or type(space).__name__ == "MissionSpace"


def check_space(space: gym.Space, where: str = "observation space") -> None:
    """Raise UnsupportedSpace unless `space` (and every part of it) is supported."""
    if isinstance(space, gym.spaces.Dict):
        for key, part in space.spaces.items():
            check_space(part, f"{where}[{key!r}]")
    elif isinstance(space, gym.spaces.Tuple):
        for index, part in enumerate(space.spaces):
            check_space(part, f"{where}[{index}]")
    elif not (is_text(space) or isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Box))):
        raise UnsupportedSpace(f"{where} {space} is not supported; supported: {SUPPORTED}")


def parts(space: gym.Space) -> list[tuple[Any, gym.Space]]:
    """(key, part) of a Dict or Tuple in flattening order."""
    if isinstance(space, gym.spaces.Dict):
        return list(space.spaces.items())
    return list(enumerate(space.spaces))


def flat_size(space: gym.Space) -> int:
    """N, the columns `flatten` gives one observation of `space`."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return sum(flat_size(part) for _, part in parts(space))
    if is_text(space):
        return 0
    if isinstance(space, gym.spaces.Discrete):
        return 1
    return int(np.prod(space.shape))


def is_integer(space: gym.Space) -> bool:
    """Whether every column of `space` is an integer (so the flat array can be int64)."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return all(is_integer(part) for _, part in parts(space))
    return is_text(space) or isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete))


def is_bytes(space: gym.Space) -> bool:
    """Whether every column of `space` is a uint8 Box value (so the flat array can be uint8)."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return all(is_bytes(part) for _, part in parts(space))
    return is_text(space) or (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8)


def flat_dtype(space: gym.Space) -> np.dtype:
    if is_integer(space):
        return np.dtype(np.int64)
    return np.dtype(np.uint8 if is_bytes(space) else np.float32)


def integer_bounds(space: gym.Space) -> tuple[int, int] | None:
    """(lowest, highest) value of any column of an all-integer `space` (Discrete, MultiDiscrete,
    and Dict or Tuple of those; Text adds no column), or None where a column is not an integer."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        bounds = [integer_bounds(part) for _, part in parts(space) if not is_text(part)]
        if any(bound is None for bound in bounds):
            return None
        return (min(b[0] for b in bounds), max(b[1] for b in bounds)) if bounds else (0, 0)
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start), int(space.start + space.n - 1)
    if isinstance(space, gym.spaces.MultiDiscrete):
        start = np.asarray(space.start)
        return int(start.min()), int((start + space.nvec - 1).max())
    return None


def compact_dtype(space: gym.Space) -> np.dtype:
    """The smallest dtype that holds every flat column of `space` exactly, for storing many
    observations (a replay buffer): for integer spaces the least integer type their bounds need
    (uint8 for small categorical features), else the flat dtype (uint8 images, float32)."""
    bounds = integer_bounds(space) if is_integer(space) else None
    if bounds is None:
        return flat_dtype(space)
    return np.result_type(np.min_scalar_type(bounds[0]), np.min_scalar_type(bounds[1]))


def flatten(space: gym.Space, obs: Any, batch: int) -> np.ndarray:
    """A batch of `batch` observations of `space` (as a vector env returns them) -> (B, N)."""
    columns = _columns(space, obs, batch)
    if not columns:
        return np.zeros((batch, 0), dtype=flat_dtype(space))
    return np.concatenate(columns, axis=1).astype(flat_dtype(space), copy=False)


def _columns(space: gym.Space, obs: Any, batch: int) -> list[np.ndarray]:
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return [column for key, part in parts(space) for column in _columns(part, obs[key], batch)]
    if is_text(space):
        return []
    return [np.asarray(obs).reshape(batch, -1)]  # (B, size of the part)


def skipped_parts(space: gym.Space, where: str = "observation") -> list[str]:
    """Where the parts that `flatten` leaves out (Text) are, e.g. ["observation['mission']"]."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return [name for key, part in parts(space) for name in skipped_parts(part, f"{where}[{key!r}]")]
    return [where] if is_text(space) else []
