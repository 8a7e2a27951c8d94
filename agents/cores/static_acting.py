"""Acting on tensors that keep their addresses from step to step: what a CUDA graph can capture.

    acting = static_acting(core, batch, device)
    acting.load(state)             # continue from a core state (copied in)
    y = acting.step(x, first)      # x (B, input_dim), first (B,) bool -> y (B, output_dim); in place
    state = acting.state()         # a core state again, for the core's own calls or a checkpoint

A step makes its outputs anew (a captured graph makes them in its own memory pool) but keeps the
memory it carries in tensors made once, fixed in shape and address, and reads nothing back.

- The Feedback core: its memory as a ring of S slots (feedback/ring.py), since its own acting
  calls extend buffers at a Python offset and start new ones every HEADROOM steps.
- A core whose state is tensors of fixed shapes (LSTM, GRU, FFM, LRU, Mamba, the echo-state
  reservoir, the MLP's empty state): the core's own one-step call, its new state copied into the same tensors.
- The others keep growing buffers (the Transformer and the reservoirs built on it): a ValueError.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from agents.cores.feedback.core import FeedbackCore
from agents.cores.feedback.ring import FeedbackRing


class StateInPlace:
    """A core with a state of fixed-shape tensors, stepped by its own T = 1 call into those tensors."""

    def __init__(self, core: nn.Module, batch: int, device: torch.device):
        self.core = core
        self.fields = core.initial_state(batch, device)  # the tensors every step writes into

    def load(self, state: NamedTuple) -> None:
        with torch.no_grad():
            for kept, given in zip(self.fields, state, strict=True):
                kept.copy_(given)

    def step(self, x: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            y, state = self.core(x[None], self.fields, first[None])
            for kept, new in zip(self.fields, state, strict=True):
                kept.copy_(new)
        return y[0]

    def state(self) -> NamedTuple:
        return type(self.fields)(*(t.clone() for t in self.fields))


def static_acting(core: nn.Module, batch: int, device: torch.device | str) -> FeedbackRing | StateInPlace:
    """The acting of `core` for `batch` envs on `device` on tensors that keep their addresses (the
    module docstring); a ValueError for a core whose state grows."""
    device = torch.device(device)
    if isinstance(core, FeedbackCore):
        return FeedbackRing(core, batch, device)
    state = core.initial_state(batch, device)
    growing = [name for name, value in state._asdict().items() if not isinstance(value, torch.Tensor)]
    if growing:
        raise ValueError(f"{type(core).__name__}'s state keeps growing buffers ({', '.join(growing)} change from step to step), so its "
                         f"acting cannot run on fixed tensors; cores that can: feedback, lstm, gru, ffm, lru, mamba, mlp, reservoir kind=esn")
    return StateInPlace(core, batch, device)
