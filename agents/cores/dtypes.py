"""The dtypes a core computes in: float32, a cast core's own (core.to(torch.bfloat16)), or the
one autocast asks for.

- `masked_score(dtype)`: the score a masked attention slot gets. Half the most negative finite
  value of the dtype: finite, so a row whose every slot is masked (an episode's first step)
  softmaxes to numbers (then zeroed), never NaN; and half, so a real score added to it (the
  Feedback core adds its mask as a bias before the dot products) cannot overflow to -inf, even
  in float16, whose range ends at 65,504 (a fixed -1e9 is -inf there).
- `compute_dtype(device, weights)`: autocast's dtype where it is on for the device, else the
  weights' dtype. The Feedback core runs its steps in it explicitly, with autocast off inside
  (`exact`), so they take the same dtypes on every device (autocast's op lists differ: on CUDA
  it would run softmax in float32, on the CPU in bfloat16).

The meta device has no autocast (torch.autocast refuses it), so nothing here asks it of meta.
"""

from __future__ import annotations

import contextlib

import torch


def masked_score(dtype: torch.dtype) -> float:
    """The score of a slot attention must not see, in `dtype` (see the module docstring)."""
    return torch.finfo(dtype).min / 2


def autocast_on(device: torch.device) -> bool:
    # (the CPU always has autocast: asking torch.amp whether it does costs an acting call ~3 us)
    return (device.type == "cpu" or torch.amp.is_autocast_available(device.type)) and torch.is_autocast_enabled(device.type)


def compute_dtype(device: torch.device, weights: torch.dtype) -> torch.dtype:
    """The dtype a call on `device` computes in: autocast's where it is on, else the weights'."""
    return torch.get_autocast_dtype(device.type) if autocast_on(device) else weights


def exact(device: torch.device):
    """A context with autocast off on `device` (where it was on): code inside picks its dtypes itself."""
    return torch.autocast(device.type, enabled=False) if autocast_on(device) else contextlib.nullcontext()
