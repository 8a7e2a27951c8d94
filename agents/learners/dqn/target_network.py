"""The target network: a second copy of the policy that the bootstrap values are read from.

`update_target(target, online, tau)`: target <- tau * online + (1 - tau) * target for every
parameter (Polyak averaging; tau = 1 copies), and the buffers (an encoder's running statistics)
copied as they are.
"""

from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def update_target(target: nn.Module, online: nn.Module, tau: float) -> None:
    for mine, theirs in zip(target.parameters(), online.parameters()):
        if tau >= 1.0:
            mine.copy_(theirs)
        else:
            mine.lerp_(theirs, tau)
    for mine, theirs in zip(target.buffers(), online.buffers()):
        mine.copy_(theirs)
