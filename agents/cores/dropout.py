"""Dropout with masks drawn by comparing uniform numbers to p.

The distribution is nn.Dropout's: each entry zeroed with probability p, the rest scaled by
1 / (1 - p). On the CPU, `torch.rand(...) >= p` draws a mask faster than the bernoulli_ that
nn.Dropout uses, and the masks are a visible share of an update of the paper's toy-task models
(docs/speed.md, Sequence tasks, gives the figures).

The Feedback core's step loop draws the masks of all its steps at once with `draw_keep`
(feedback/core.py), in the order the layers use them, and keeps them as bool (a quarter of float32's
memory; each step scales its own); the Transformer applies `Dropout` modules.
"""

from __future__ import annotations

import torch
from torch import nn


def draw_keep(count: int, shape: tuple[int, ...], p: float, device: torch.device) -> torch.Tensor:
    """(count, *shape) bool: False (dropped) with probability p."""
    return torch.rand((count, *shape), device=device) >= p


def draw_masks(count: int, shape: tuple[int, ...], p: float, like: torch.Tensor) -> torch.Tensor:
    """(count, *shape) masks: 0 with probability p, else 1 / (1 - p); dtype and device of `like`."""
    return draw_keep(count, shape, p, like.device).to(like.dtype).mul_(1.0 / (1.0 - p))


class Dropout(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        return x * draw_masks(1, tuple(x.shape), self.p, x)[0]

    def extra_repr(self) -> str:
        return f"p={self.p}"
