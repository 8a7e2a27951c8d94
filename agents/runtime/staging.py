"""Host arrays to the learner device in one copy.

An acting step hands the policy several small arrays (observation, previous action and reward,
episode starts); copied one by one, each is a synchronous host-to-device transfer on CUDA. A
`Staging` packs them side by side, as bytes, into one host buffer (pinned when the device is
CUDA, so the copy can run asynchronously), copies that with non_blocking=True, and views each
part back in its own dtype on the device: uint8 images stay uint8 (the encoders convert them,
on the device). Each part starts at a multiple of 8 bytes, so every dtype's view is aligned.

The buffer is refilled by the next call, so on CUDA that call first waits for the copy from it
to have finished (an event recorded after it): the only wait, and a short one, since a step reads
its actions back anyway. `bytes_to_device` counts what crossed (benchmarks/a2c.py reports it per
frame).

This module is the learner's: actor workers (agents/runtime/actors.py) import no torch.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

ALIGN = 8  # bytes: the widest element a part may have


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


@functools.cache
def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype


class Staging:
    def __init__(self, device: torch.device):
        self.device = device
        self.pinned = device.type == "cuda"
        self.host = torch.empty(0, dtype=torch.uint8)
        self.copied: torch.cuda.Event | None = None  # recorded after the last copy out of `host` (CUDA)
        self.bytes_to_device = 0

    def to_device(self, arrays: list[np.ndarray]) -> list[torch.Tensor]:
        """The arrays on the device, each a fresh tensor of its own dtype and shape."""
        offsets = np.cumsum([0] + [_aligned(a.nbytes) for a in arrays])
        size = int(offsets[-1])
        if self.copied is not None:
            self.copied.synchronize()
        if self.host.numel() < size:
            self.host = torch.empty(size, dtype=torch.uint8, pin_memory=self.pinned)
        host = self.host.numpy()
        for array, start in zip(arrays, offsets):
            host[start : start + array.nbytes].view(array.dtype).reshape(array.shape)[...] = array
        moved = torch.empty(size, dtype=torch.uint8, device=self.device)
        moved.copy_(self.host[:size], non_blocking=True)
        if self.pinned:
            self.copied = torch.cuda.Event()
            self.copied.record()
        self.bytes_to_device += size
        return [moved[start : start + array.nbytes].view(_torch_dtype(array.dtype)).view(array.shape)
                for array, start in zip(arrays, offsets)]
