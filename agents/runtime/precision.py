"""--precision, shared by the A2C trainer and seqtasks: "fp32" computes in float32 throughout;
"bf16" runs the forward passes under torch.autocast in bfloat16 on the run's device, the way GPUs
train, while the weights, their gradients, the optimiser and the losses stay float32 (the
trainers cast the model's outputs to float32 before their losses). The cores follow autocast
(agents/cores/dtypes.py: the Feedback core computes its steps in bfloat16 explicitly, its norms
and gradient sums in float32)."""

from __future__ import annotations

import contextlib

import torch

PRECISIONS = ("fp32", "bf16")


def check_precision(value) -> None:
    if value not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {value!r}")


def autocast(device: torch.device, precision: str):
    """The context the forward passes of a run at `precision` on `device` run in. (No autocast
    context at all for fp32: the meta device the tests use has none.)"""
    check_precision(precision)
    return contextlib.nullcontext() if precision == "fp32" else torch.autocast(device.type, dtype=torch.bfloat16)
