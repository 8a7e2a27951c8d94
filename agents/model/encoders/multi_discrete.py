"""MultiDiscrete of any shape (start offsets included): one embedding per feature, concatenated.

All features share one table: feature f's value v is row offsets[f] + v - start[f]. The table is
`embedding`, and for our envs' 1-D spaces it is made first and in the same way as before encoders
were chosen by space, so runs seeded alike start from the same weights.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.model.encoders.base import Encoder


class MultiDiscreteEncoder(Encoder):
    def __init__(self, space: gym.spaces.MultiDiscrete, embed_dim: int):
        super().__init__()
        nvec = [int(n) for n in np.asarray(space.nvec).reshape(-1)]
        start = np.asarray(space.start).reshape(-1).astype(np.int64)
        self.embedding = nn.Embedding(sum(nvec), embed_dim)
        offsets = torch.tensor([0] + nvec[:-1]).cumsum(0) - torch.as_tensor(start)
        self.register_buffer("offsets", offsets, persistent=False)  # (F,)
        self.output_dim = len(nvec) * embed_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., F) -> (..., F * embed)."""
        return self.embedding(x.long() + self.offsets).flatten(-2)
