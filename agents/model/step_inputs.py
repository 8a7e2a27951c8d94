"""What the policy takes for a run of steps: one record, so its parts cannot drift apart.

A policy call over L steps of B envs takes each step's observation, the previous action and
reward, and `first` (the step begins an episode; the core forgets there). Beside `first`, a device
tensor, the record can carry `starts`, the same values on the host: episodes are packed side by
side by a plan made there (agents/learners/episode_packing.py), and reading `first` back from a
GPU would stall it. Whatever is done to the steps (cutting them in time, choosing envs, joining
runs, moving them) is done here to all five at once, so `starts` stays `first`'s copy.

Letters: L steps, B envs, N flat observation columns (agents/runtime/observations.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class StepInputs:
    """The policy's inputs for L steps of B envs, on one device; `starts` on the host."""

    obs: torch.Tensor  # (L, B, N) in the flat array's dtype
    prev_action: torch.Tensor  # (L, B) long; the policy's num_actions where there is none (an episode's first step)
    prev_reward: torch.Tensor  # (L, B)
    first: torch.Tensor  # (L, B) bool: the step begins an episode
    starts: np.ndarray | None = None  # (L, B) bool: `first`'s values on the host; None where not kept (nothing is packed)

    def __post_init__(self):
        shape = tuple(self.first.shape)
        if len(shape) != 2:
            raise ValueError(f"first must be (steps, envs), got shape {shape}")
        for name in ("obs", "prev_action", "prev_reward"):
            given = tuple(getattr(self, name).shape)
            if given[:2] != shape:
                raise ValueError(f"{name} has shape {given}, but first has {shape}: every input begins (steps, envs)")
        if self.starts is not None and (self.starts.shape != shape or self.starts.dtype != bool):
            raise ValueError(f"starts must be first's values on the host, bool of shape {shape}; "
                             f"got {self.starts.dtype} of shape {self.starts.shape}")

    def __len__(self) -> int:
        """L: the steps."""
        return self.first.shape[0]

    def steps(self, start: int | None = None, stop: int | None = None) -> StepInputs:
        """Steps start .. stop - 1 (a slice's bounds, negative ones from the end)."""
        cut = slice(start, stop)
        return StepInputs(self.obs[cut], self.prev_action[cut], self.prev_reward[cut], self.first[cut],
                          None if self.starts is None else self.starts[cut])

    def select_envs(self, index: torch.Tensor, on_device: torch.Tensor) -> StepInputs:
        """Envs `index` ((K,) long on the host), in that order; `on_device` is the same index on
        the tensors' device (the caller makes it once: PPO picks its other tensors with it too)."""
        return StepInputs(self.obs[:, on_device], self.prev_action[:, on_device], self.prev_reward[:, on_device],
                          self.first[:, on_device], None if self.starts is None else self.starts[:, index.numpy()])

    @staticmethod
    def cat(parts: list[StepInputs]) -> StepInputs:
        """The parts' steps one after another (the same envs in each); `starts` kept where every
        part has them."""
        starts = [part.starts for part in parts]
        return StepInputs(torch.cat([part.obs for part in parts]), torch.cat([part.prev_action for part in parts]),
                          torch.cat([part.prev_reward for part in parts]), torch.cat([part.first for part in parts]),
                          None if any(s is None for s in starts) else np.concatenate(starts))

    def to(self, device: torch.device | str) -> StepInputs:
        """The tensors on `device`; `starts` stays on the host."""
        return StepInputs(self.obs.to(device), self.prev_action.to(device), self.prev_reward.to(device),
                          self.first.to(device), self.starts)
