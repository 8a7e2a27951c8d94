"""Discrete(n, start): one embedding of the value."""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from agents.model.encoders.base import Encoder


class DiscreteEncoder(Encoder):
    def __init__(self, space: gym.spaces.Discrete, embed_dim: int):
        super().__init__()
        self.start = int(space.start)
        self.embed = nn.Embedding(int(space.n), embed_dim)
        self.output_dim = embed_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., 1) -> (..., embed)."""
        return self.embed(x[..., 0].long() - self.start)
