"""What every observation encoder is: a module from an observation's flat columns to a vector.

`forward(x)`: x (..., N) holds one part's columns as agents/runtime/observations.py:flatten lays them out
(int64 or float32) -> (..., output_dim) float. `observe(x, mask)` updates statistics the encoder
keeps about its inputs (the Box encoder's running normalisation) with the rows where mask (...)
is True (all without one); the trainer calls it after each update with the rollout's
observations and its valid steps, so acting and learning on a rollout use the same ones.
"""

from __future__ import annotations

import torch
from torch import nn


class Encoder(nn.Module):
    output_dim: int

    def observe(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Most encoders keep no statistics."""
