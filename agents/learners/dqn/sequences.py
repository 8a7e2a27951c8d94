"""Acting's steps cut into the sequences the replay stores, as numpy arrays.

Every sequence is M steps of one env, each step the Actor's record of it (agents/learners/rollout.py:
the policy's inputs obs, prev_action, prev_reward, first; valid, False on the step that shows an
ended episode's last observation; the action taken, the reward and the episode's end after it).
A step with valid False carries no loss: it is the observation a truncated episode's last step
bootstraps from. Two ways to cut them:

- `EpisodeCutter`: whole episodes, first step to the last observation, padded to M = the env's
  longest episode + 1 with steps that are not valid (their outputs are never read). The replayed
  sequence starts from the core's initial state, which its first step resets to anyway.
- `SegmentCutter`: R2D2's fixed-length segments, M = burn-in + the segment's loss steps + n
  (the n-step targets of its last loss steps), one starting every `stride` = loss steps, so
  neighbours overlap by burn-in + n and every step after the first burn-in carries a loss in one
  segment. Episodes run through them (`first` marks their starts). Each segment keeps the core
  state acting had before its first step, so that replaying it from there gives acting's outputs
  (the state a step's weights made; the learner's weights have moved since, which the burn-in
  makes up for); or, with `stores_state` False, none: the segment starts from the empty state
  and the burn-in alone rebuilds the memory. All envs step together, so a segment starts for
  every env at once.

`add(record, state_before)` takes one step of all B envs and the core state before it, and
returns the sequences finished on it: (E, M) arrays (`FIELDS`), and for segments "state.NAME"
arrays (E, ...) of the start state's fields. What is unfinished is saved and restored with
`pending()` / `load_pending()`: a resumed run goes on cutting where it stopped.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

# name -> dtype ("obs" and the actions: chosen per env)
FIELDS = ("obs", "prev_action", "prev_reward", "first", "valid", "action", "reward", "terminated", "truncated")


def step_dtypes(obs_dtype: np.dtype, num_actions: int) -> dict[str, np.dtype]:
    """The stored dtype of each field: observations compact (agents/runtime/observations.py:compact_dtype),
    actions the least integer type holding num_actions (the "none" previous action)."""
    action = np.min_scalar_type(num_actions)
    return {"obs": np.dtype(obs_dtype), "prev_action": action, "prev_reward": np.dtype(np.float32), "first": np.dtype(bool),
            "valid": np.dtype(bool), "action": action, "reward": np.dtype(np.float32), "terminated": np.dtype(bool),
            "truncated": np.dtype(bool)}


def empty_steps(shape: tuple[int, ...], obs_columns: int, dtypes: dict[str, np.dtype]) -> dict[str, np.ndarray]:
    """Zeroed arrays of every field, `shape` + (N,) for obs, `shape` for the others."""
    return {name: np.zeros(shape + ((obs_columns,) if name == "obs" else ()), dtype=dtype) for name, dtype in dtypes.items()}


def state_arrays(state: NamedTuple, core: str) -> dict[str, np.ndarray]:
    """A core state's fields as (B, ...) numpy arrays ("state.NAME"); a ValueError for a state
    with fields shared by the whole batch (a ring's position: the Transformer, Feedback), which
    segments started at different times cannot be batched with."""
    arrays = {}
    for name, value in state._asdict().items():
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"segment replay stores each segment's start state, and core {core!r} keeps a field shared by the "
                             f"whole batch ({type(state).__name__}.{name}), which segments from different times cannot share; "
                             f"use --segment-state empty (each segment from the empty state, rebuilt by the burn-in) or "
                             f"--replay episodes on an env with bounded episodes")
        arrays[f"state.{name}"] = value.detach().float().cpu().numpy() if value.is_floating_point() else value.cpu().numpy()
    return arrays


class EpisodeCutter:
    """Whole episodes of B envs, each up to M steps (the last its final observation)."""

    def __init__(self, num_envs: int, length: int, obs_columns: int, dtypes: dict[str, np.dtype]):
        self.length = length
        self.steps = empty_steps((num_envs, length), obs_columns, dtypes)  # (B, M, ...)
        self.position = np.zeros(num_envs, dtype=np.int64)  # steps of each env's running episode so far

    def add(self, record: dict[str, np.ndarray], state_before: Any = None) -> dict[str, np.ndarray] | None:
        rows = np.arange(len(self.position))
        if (record["first"] & (self.position > 0)).any() or (~record["first"] & (self.position == 0)).any():
            raise AssertionError("an episode must start at the first step of its sequence: the cutter lost its place")
        if (self.position >= self.length).any():
            longest = self.length - 1
            raise ValueError(f"an episode ran past {longest} steps, the env's longest episode; --replay episodes needs episodes "
                             f"of bounded length (use --replay segments)")
        for name, values in self.steps.items():
            values[rows, self.position] = record[name]
        self.position += 1
        ended = ~record["valid"]  # the step that showed an episode's last observation
        if not ended.any():
            return None
        done = {name: values[ended].copy() for name, values in self.steps.items()}
        for values in self.steps.values():
            values[ended] = 0
        self.position[ended] = 0
        return done

    def pending(self) -> dict[str, np.ndarray]:
        return {**{f"pending.{name}": values for name, values in self.steps.items()}, "pending.position": self.position}

    def load_pending(self, arrays: dict[str, np.ndarray]) -> None:
        for name, values in self.steps.items():
            values[...] = arrays[f"pending.{name}"]
        self.position[...] = arrays["pending.position"]

    def clear(self) -> None:
        """Forget the running episodes (a resume that restarts them)."""
        for values in self.steps.values():
            values[...] = 0
        self.position[...] = 0


class SegmentCutter:
    """Segments of M steps of B envs, one starting every `stride` steps, with their start state."""

    def __init__(self, num_envs: int, length: int, stride: int, obs_columns: int, dtypes: dict[str, np.dtype], core: str,
                 stores_state: bool = True):
        self.length, self.stride, self.core, self.stores_state = length, stride, core, stores_state
        self.ring = empty_steps((num_envs, length), obs_columns, dtypes)  # (B, M, ...): step t at t % M
        self.time = 0  # steps taken so far
        self.starts: list[tuple[int, dict[str, np.ndarray]]] = []  # (the step a pending segment starts at, its start state)

    def add(self, record: dict[str, np.ndarray], state_before: NamedTuple) -> dict[str, np.ndarray] | None:
        if self.time % self.stride == 0:
            self.starts.append((self.time, state_arrays(state_before, self.core) if self.stores_state else {}))
        for name, values in self.ring.items():
            values[:, self.time % self.length] = record[name]
        self.time += 1
        if not self.starts or self.time - self.starts[0][0] < self.length:
            return None
        start, state = self.starts.pop(0)
        order = (start + np.arange(self.length)) % self.length  # steps start .. start + M - 1
        return {**{name: values[:, order].copy() for name, values in self.ring.items()}, **state}

    def pending(self) -> dict[str, np.ndarray]:
        arrays = {f"pending.{name}": values for name, values in self.ring.items()}
        arrays["pending.time"] = np.array(self.time)
        arrays["pending.starts"] = np.array([start for start, _ in self.starts], dtype=np.int64)
        for index, (_, state) in enumerate(self.starts):
            arrays.update({f"pending.{index}.{name}": values for name, values in state.items()})
        return arrays

    def load_pending(self, arrays: dict[str, np.ndarray]) -> None:
        for name, values in self.ring.items():
            values[...] = arrays[f"pending.{name}"]
        self.time = int(arrays["pending.time"])
        self.starts = []
        for index, start in enumerate(arrays["pending.starts"].tolist()):
            prefix = f"pending.{index}."
            self.starts.append((start, {key[len(prefix):]: arrays[key] for key in arrays if key.startswith(prefix)}))

    def clear(self) -> None:
        """Forget the steps so far (a resume that restarts the episodes and the core state)."""
        for values in self.ring.values():
            values[...] = 0
        self.time = 0
        self.starts = []
