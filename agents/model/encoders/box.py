"""Box, low-dimensional: running normalisation of every value, then one linear layer.

The mean and variance are running statistics over every observation trained on (Welford's
parallel update), kept as buffers so that checkpoints save them and a resumed or evaluated agent
sees its inputs as it was trained to. Normalised values are clipped to +-CLIP.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.model.encoders.base import Encoder

WIDTH = 64  # the encoding's size
CLIP = 10.0
EPS = 1e-8


class RunningNorm(nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("var", torch.ones(size))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., N) -> (..., N) normalised."""
        return ((x - self.mean) / torch.sqrt(self.var + EPS)).clamp(-CLIP, CLIP)

    @torch.no_grad()
    def update(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Fold a batch x (..., N) into the running mean and variance: the rows where mask (...)
        is True (all rows without one). The mask weighs rows rather than selecting them, and an
        empty batch leaves the statistics as they were through torch.where, not an `if`: nothing
        is read back to the host (on CUDA, a synchronisation)."""
        x = x.reshape(-1, x.shape[-1]).to(self.mean.dtype)
        weight = x.new_ones(x.shape[0], 1) if mask is None else mask.reshape(-1, 1).to(x.dtype)
        n = weight.sum()
        mean = (x * weight).sum(0) / n.clamp(min=1)
        var = ((x - mean).square() * weight).sum(0) / n.clamp(min=1)
        total = self.count + n
        delta = mean - self.mean
        m2 = self.var * self.count + var * n + delta**2 * self.count * n / total.clamp(min=1)
        seen = n > 0
        self.mean.copy_(torch.where(seen, self.mean + delta * n / total.clamp(min=1), self.mean))
        self.var.copy_(torch.where(seen, (m2 / total.clamp(min=1)).to(self.var.dtype), self.var))
        self.count.copy_(total)


class BoxEncoder(Encoder):
    def __init__(self, space: gym.spaces.Box):
        super().__init__()
        size = int(np.prod(space.shape))
        self.norm = RunningNorm(size)
        self.linear = nn.Linear(size, WIDTH)
        self.output_dim = WIDTH

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., N) -> (..., WIDTH)."""
        return torch.relu(self.linear(self.norm(x.float())))

    def observe(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        self.norm.update(x.float(), mask)
