"""MLP core: a per-step feed-forward net with no memory at all.

The control: a task the MLP solves as well as the memory cores does not need memory. It keeps
the core interface (an empty state, `first` ignored) so the trainer never branches on it.
Its layers are Linear + tanh, as in CleanRL's PPO agents: a tanh unit never dies, where a dead
ReLU in a narrow net stops all gradient to the layers below.

Letters: T steps, B envs, I input width, H hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from agents.cores.checks import check_at_least
from agents.cores.state import register_state


@dataclass
class MLPConfig:
    hidden_size: int = 64
    n_layers: int = 2  # Linear + tanh layers

    def __post_init__(self):
        check_at_least("hidden_size", self.hidden_size, 1)
        check_at_least("n_layers", self.n_layers, 1)


@register_state
class MLPState(NamedTuple):
    """No fields: nothing is carried from one step to the next."""


class MLPCore(nn.Module):
    sequential = False  # its steps run side by side: packing episodes would only add padding (agents/learners/episode_packing.py)

    def __init__(self, input_dim: int, config: MLPConfig):
        super().__init__()
        self.config = config
        self.output_dim = config.hidden_size
        layers = []
        for width in [input_dim] + [config.hidden_size] * (config.n_layers - 1):
            layers += [nn.Linear(width, config.hidden_size), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def initial_state(self, batch_size: int, device: torch.device | str) -> MLPState:
        return MLPState()

    def forward(self, x: torch.Tensor, state: MLPState, first: torch.Tensor) -> tuple[torch.Tensor, MLPState]:
        """x: (T, B, I) -> y: (T, B, H), each step on its own; first (T, B) changes nothing."""
        return self.net(x), state
