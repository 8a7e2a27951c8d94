"""Choosing the torch device from a command-line string."""

from __future__ import annotations

import torch


def resolve_device(spec: str) -> torch.device:
    """'auto' is CUDA when present, else CPU; 'cpu', 'cuda', 'cuda:N' are taken as given (checked:
    a resumed run's saved device too, so the message names the flag that overrides it)."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except RuntimeError as error:
        raise ValueError(f"unknown device {spec!r}; use 'auto', 'cpu', 'cuda' or 'cuda:N'") from error
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"unsupported device {spec!r}; use 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {spec!r}, but torch sees no CUDA GPU here; use --device cpu (or auto)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {spec!r} does not exist; this machine has {torch.cuda.device_count()} GPU(s)")
    return device
