"""MiniGrid's symbolic view (H, W, 3): per channel an embedding (object type, colour, state),
concatenated per cell, then one linear layer over the view.

MiniGrid's "image" is not pixels but three small integers per cell; embedding them keeps a door
and a key apart where a CNN over values 0-10 would see nearby numbers. The vocabularies are
MiniGrid 3's OBJECT_TO_IDX, COLOR_TO_IDX and STATE_TO_IDX (11, 6, 3), written here so this
module needs no minigrid import.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from agents.model.encoders.base import Encoder

VOCABULARIES = (11, 6, 3)  # object type, colour, state
WIDTH = 64  # the encoding's size
EMBED = 8  # per channel


def is_minigrid_view(space: gym.Space) -> bool:
    """MiniGrid's observation: a Dict with a MissionSpace 'mission' and a (H, W, 3) 'image'."""
    return (
        isinstance(space, gym.spaces.Dict)
        and type(space.spaces.get("mission")).__name__ == "MissionSpace"
        and isinstance(space.spaces.get("image"), gym.spaces.Box)
        and len(space["image"].shape) == 3 and space["image"].shape[2] == len(VOCABULARIES)
    )


class MiniGridEncoder(Encoder):
    def __init__(self, space: gym.spaces.Box):
        super().__init__()
        height, width, _ = space.shape
        self.embeds = nn.ModuleList(nn.Embedding(size, EMBED) for size in VOCABULARIES)
        self.shape = (height, width, len(VOCABULARIES))
        self.linear = nn.Linear(height * width * len(VOCABULARIES) * EMBED, WIDTH)
        self.output_dim = WIDTH

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., H * W * 3) -> (..., WIDTH)."""
        cells = x.long().reshape(*x.shape[:-1], -1, len(VOCABULARIES))  # (..., H * W, 3)
        embedded = torch.cat([embed(cells[..., c]) for c, embed in enumerate(self.embeds)], dim=-1)  # (..., H * W, 3 * EMBED)
        return torch.relu(self.linear(embedded.flatten(-2)))
