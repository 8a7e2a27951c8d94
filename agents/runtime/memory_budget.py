"""Sizes checked against the memory the machine has, before anything is allocated.

A size that no machine can hold (`--num-envs 1e12`, a checkpoint that inflates to gigabytes)
would otherwise hang in an allocation, page the machine to a halt, or end in a traceback far from
the value that caused it. So a command estimates what a value asks for and refuses it with the
estimate (`check_fits`) while nothing has been allocated. The bound is the memory available now
(Linux's MemAvailable: free memory plus what the kernel can reclaim), the same on every machine
this runs on; where it cannot be read, nothing is refused.
"""

from __future__ import annotations

import os
from typing import Callable

import torch

# A model's bytes per parameter while it trains: the weights, their gradients and an adaptive
# optimiser's two moments (Adam's; RMSprop keeps one), in float32.
TRAINING_BYTES_PER_PARAMETER = 4 * 4


class TooLarge(ValueError):
    """A size whose memory the machine does not have; the message gives the estimate."""


def available_bytes() -> int | None:
    """The memory available to a new allocation now, in bytes; None where it cannot be read."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def gib(size: float) -> str:
    """`size` bytes as GiB for a message: "12.3 GiB" (or MiB below one GiB)."""
    return f"{size / 2**30:,.1f} GiB" if size >= 2**30 else f"{size / 2**20:,.1f} MiB"


def check_fits(what: str, size: float, fix: str) -> None:
    """TooLarge if `size` bytes (an estimate of what `what` asks for) exceed the memory available;
    the message names `what`, the estimate and the memory, and ends with `fix` (what to lower)."""
    available = available_bytes()
    if available is not None and size > available:
        raise TooLarge(f"{what} needs about {gib(size)} of memory and this machine has {gib(available)} available; {fix}")


def check_model_fits(build: Callable[[], torch.nn.Module], what: str, fix: str) -> None:
    """Build the model `build` makes on the meta device (shapes only, no memory) and check that
    training it fits (TRAINING_BYTES_PER_PARAMETER a parameter); TooLarge naming `what` if not,
    or if its sizes overflow what a tensor can hold."""
    try:
        with torch.device("meta"):
            model = build()
    except RuntimeError as error:
        if "overflow" not in str(error):
            raise
        raise TooLarge(f"{what} asks for tensors larger than any machine holds ({error}); {fix}") from None
    count = sum(tensor.numel() for tensor in (*model.parameters(), *model.buffers()))
    check_fits(f"{what} ({count:,} parameters, trained)", count * TRAINING_BYTES_PER_PARAMETER, fix)
