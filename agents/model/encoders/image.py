"""Box images (H, W, C) of uint8 pixels, C <= 4, or (H, W) greyscale: a small CNN.

Pixels scaled to [0, 1], two 3x3 convolutions (the second of stride 2; the first of stride 2 too
for images of 32 pixels or more), pooled to 4 x 4 so any size gives the same width, then a linear
layer.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from agents.model.encoders.base import Encoder

WIDTH = 64  # the encoding's size
MAX_CHANNELS = 4


def is_image(space: gym.spaces.Box) -> bool:
    shape = space.shape
    return space.dtype == "uint8" and (
        (len(shape) == 3 and shape[2] <= MAX_CHANNELS and min(shape[:2]) >= 2) or (len(shape) == 2 and min(shape) >= 2)
    )


class ImageEncoder(Encoder):
    def __init__(self, space: gym.spaces.Box):
        super().__init__()
        self.shape = tuple(space.shape) if len(space.shape) == 3 else (*space.shape, 1)  # (H, W, C)
        height, width, channels = self.shape
        first_stride = 2 if min(height, width) >= 32 else 1
        self.net = nn.Sequential(
            nn.Conv2d(channels, 16, 3, stride=first_stride, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(4), nn.Flatten(),
            nn.Linear(32 * 4 * 4, WIDTH), nn.ReLU(),
        )
        self.output_dim = WIDTH

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., H * W * C) -> (..., WIDTH)."""
        lead = x.shape[:-1]
        images = x.float().reshape(-1, *self.shape).permute(0, 3, 1, 2) / 255.0  # (L, C, H, W)
        return self.net(images).reshape(*lead, self.output_dim)
