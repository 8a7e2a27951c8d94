"""Operations on any core's state, whatever its fields.

Every core's state is a NamedTuple whose tensor fields are batch-major (dimension 0 is the env),
beside fields shared by the whole batch (a buffer's end, a weights version, an append log).
"""

from __future__ import annotations

from typing import NamedTuple

import torch


def select_envs(state: NamedTuple, index: torch.Tensor) -> NamedTuple:
    """The state of envs `index` (a (K,) long or (B,) bool tensor), in that order: for actors
    that own a shard of the envs, or for dropping envs from a batch."""
    return state._replace(**{name: value[index] for name, value in state._asdict().items() if isinstance(value, torch.Tensor)})


def move_state(state: NamedTuple, device: torch.device | str) -> NamedTuple:
    """The state with its tensors on `device` (a loaded checkpoint's, for instance)."""
    return state._replace(**{name: value.to(device) for name, value in state._asdict().items() if isinstance(value, torch.Tensor)})
