"""Keep the memory a training process frees, for its next allocation, instead of returning it.

PyTorch's CPU tensors come from the C library's malloc. glibc serves a large one (past a
threshold that starts at 128 KiB) with a fresh mapping and unmaps it when it is freed, and it
gives the top of its heap back to the system once more than a threshold is free there. Either
way the next tensor of that size starts on fresh pages, and the kernel's first touch of each
4 KiB page costs a page fault. A training loop frees and allocates the same sizes every
step (the learning pass's tape and gradients, acting's refilled buffers: append_log.py), so it
pays those faults again and again: at the CPU preset, about 850 a Feedback learning call and
the acting buffers' copy every 64 steps (docs/speed.md, "Memory kept").

keep_freed_memory() raises both thresholds (mallopt), once per process, where the C library is
glibc and the user has not set them in the environment (MALLOC_MMAP_THRESHOLD_,
MALLOC_TRIM_THRESHOLD_, which glibc reads at start and which are then left as they are): freed
memory stays in the process for the next allocation. The cost is that a process's resident
memory stays near its peak, which a training process reaches again every update anyway.
Elsewhere (macOS, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 << 20  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit): larger allocations are still mapped
TRIM_THRESHOLD = 1 << 30  # free memory kept at the heap's top, at most
ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_done: list[bool] = []


def keep_freed_memory() -> bool:
    """Have glibc keep freed memory for reuse (see the module docstring); True where it now does.
    The first call decides; later ones return its answer."""
    if not _done:
        _done.append(_set_thresholds())
    return _done[0]


def _set_thresholds() -> bool:
    if platform.libc_ver()[0] != "glibc" or any(name in os.environ for name in ENVIRONMENT):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
