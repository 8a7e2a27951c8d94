"""Dict and Tuple: each part encoded by its own encoder, the encodings concatenated.

Parts without columns (text, see agents/runtime/observations.py) have no encoder and are left out.
"""

from __future__ import annotations

import torch
from torch import nn

from agents.model.encoders.base import Encoder


class CompositeEncoder(Encoder):
    def __init__(self, children: list[tuple[str, Encoder | None, int]]):
        """children: (name, encoder or None for a skipped part, its flat columns) in flattening order."""
        super().__init__()
        self.parts = nn.ModuleDict({name: encoder for name, encoder, _ in children if encoder is not None})
        self.sizes = [size for _, _, size in children]
        self.names = [name if encoder is not None else None for name, encoder, _ in children]
        self.output_dim = sum(encoder.output_dim for encoder in self.parts.values())

    def _split(self, x: torch.Tensor):
        """(name, columns (..., size)) of each encoded part."""
        for name, columns in zip(self.names, torch.split(x, self.sizes, dim=-1)):
            if name is not None:
                yield name, columns

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., N) -> (..., sum of the parts' widths)."""
        return torch.cat([self.parts[name](columns) for name, columns in self._split(x)], dim=-1)

    def observe(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        for name, columns in self._split(x):
            self.parts[name].observe(columns, mask)
