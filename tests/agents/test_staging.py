"""Host arrays to the device in one copy (agents/runtime/staging.py): each comes back in its own dtype,
shape and values, as a tensor of its own (a later copy through the same buffer leaves it alone),
and the bytes counted are the copy's, parts padded to 8 bytes. Pinned only for CUDA."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from agents.runtime.staging import Staging

DTYPES = [np.uint8, np.int64, np.float32, np.float64, np.bool_, np.int32]


@settings(derandomize=True, max_examples=40, deadline=None)
@given(st.lists(arrays(st.sampled_from(DTYPES), st.tuples(st.integers(1, 4), st.integers(0, 5))), min_size=1, max_size=6))
def test_arrays_cross_in_their_own_dtype_and_values(parts):
    staging = Staging(torch.device("cpu"))
    moved = staging.to_device(parts)
    kept = [tensor.clone() for tensor in moved]
    staging.to_device([np.zeros_like(part) for part in parts])  # refills the same host buffer
    for part, tensor, before in zip(parts, moved, kept):
        assert tensor.dtype == torch.from_numpy(part).dtype and tuple(tensor.shape) == part.shape
        assert tensor.numpy().tobytes() == before.numpy().tobytes() == np.ascontiguousarray(part).tobytes()  # bit for bit, NaNs too
    assert staging.bytes_to_device == 2 * sum(-(-part.nbytes // 8) * 8 for part in parts)


def test_pinned_only_for_cuda():
    assert not Staging(torch.device("cpu")).pinned and not Staging(torch.device("meta")).pinned
