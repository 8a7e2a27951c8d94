"""The chunked feed-forward attention pass against its reference definition (dense_pool): the same
c and the same gradients for every weight and the input, at any chunk size, with left padding,
for both variants; and it keeps nothing of size (B, L, D) for the backward pass.

Gradients are compared in float64, where both paths agree to about 1e-16: a tolerance of 1e-12
is far above rounding and far below any mistake."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqtasks.ffattn import FeedForwardAttention, chunked_pool, dense_pool
from tests.float32 import close32

FLOAT64 = dict(rtol=1e-12, atol=1e-12)


def batch(lengths: list[int], steps: int, hidden: int, attention: bool):
    """Float64 inputs left-padded to `steps` (random junk in the padding) and pool weights, all
    requiring gradients: (x, lengths, weights)."""
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64).requires_grad_()

    weights = [randn(hidden, 2), randn(hidden)] + ([randn(1, hidden), randn(1)] if attention else [])
    return randn(len(lengths), steps, 2), torch.tensor(lengths), weights


def assert_same_as_dense(x, lengths, weights, chunk: int, slope: float = 0.0):
    dense = dense_pool(x, lengths, *weights, negative_slope=slope)
    chunked = chunked_pool(x, lengths, *weights, negative_slope=slope, chunk=chunk)
    torch.testing.assert_close(chunked, dense, **FLOAT64)
    g = torch.randn(dense.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)  # dL/dc
    inputs = [x, *weights]
    for got, want in zip(torch.autograd.grad(chunked, inputs, g), torch.autograd.grad(dense, inputs, g)):
        torch.testing.assert_close(got, want, **FLOAT64)


@pytest.mark.parametrize("slope", [0.0, 0.2])
@pytest.mark.parametrize("attention", [True, False])
def test_gradcheck(attention, slope):
    x, lengths, weights = batch([5, 2], steps=5, hidden=3, attention=attention)  # chunks of 2, 2, 1
    assert torch.autograd.gradcheck(lambda x, *w: chunked_pool(x, lengths, *w, negative_slope=slope, chunk=2), (x, *weights))


@pytest.mark.parametrize("attention", [True, False])
@pytest.mark.parametrize(
    "steps, chunk, lengths",
    [
        (12, 4, [12, 9, 1]),  # a multiple of the chunk
        (13, 4, [13, 2, 7]),  # the last chunk is short
        (5, 8, [5, 3, 4]),  # one chunk, longer than the sequence
        (9, 1, [9, 6, 1]),  # one step at a time
        (12, 4, [6, 5, 1]),  # the first chunk is padding in every row
        (40, 7, [40, 40, 40]),  # no padding
    ],
)
def test_chunked_equals_dense(steps, chunk, lengths, attention):
    assert_same_as_dense(*batch(lengths, steps, hidden=6, attention=attention), chunk=chunk)


@settings(derandomize=True, deadline=None, max_examples=25)
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=4),
    extra=st.integers(0, 5),
    chunk=st.integers(1, 40),
    attention=st.booleans(),
    slope=st.sampled_from([0.0, 0.01, 0.2]),
)
def test_chunked_equals_dense_for_any_batch(lengths, extra, chunk, attention, slope):
    # `extra` steps of padding in every row on top of the longest sequence's
    assert_same_as_dense(*batch(lengths, max(lengths) + extra, hidden=5, attention=attention), chunk=chunk, slope=slope)


@pytest.mark.parametrize("attention", [True, False])
def test_model_matches_dense_in_float32(attention):
    torch.manual_seed(0)
    model = FeedForwardAttention(2, 16, attention, chunk=8)
    x, lengths = torch.randn(4, 50, 2), torch.tensor([50, 49, 30, 7])
    dense = model.head(dense_pool(x, lengths, *model.pool_weights(), model.negative_slope))
    # float32 sums over 50 steps in another order (chunk by chunk, rescaled)
    torch.testing.assert_close(model(x, lengths), dense, **close32(terms=50))


@pytest.mark.parametrize("attention", [True, False])
def test_backward_keeps_no_step_by_hidden_tensor(attention):
    x, lengths, weights = batch([30, 20], steps=30, hidden=7, attention=attention)
    c = chunked_pool(x, lengths, *weights, chunk=4)
    saved = [t for t in c.grad_fn.saved_tensors if t is not None]
    assert max(t.numel() for t in saved) == x.numel()  # (B, L, C) inputs; the rest (B, L) or smaller


@pytest.mark.parametrize("option, value, message", [
    *(("chunk", chunk, f"chunk must be a whole number of steps >= 1, got {chunk}") for chunk in (0, -3, 2.5)),
    *(("negative_slope", slope, f"negative_slope must be a number in \\[0, 1\\) \\(0: ReLU\\), got {slope!r}") for slope in (-0.1, 1.0, True, "0.01")),
])
def test_the_model_and_the_pool_refuse_bad_options(option, value, message):
    """A chunk that is not a positive whole number, a slope outside [0, 1): named by the model and
    by the pool it calls."""
    with pytest.raises(ValueError, match=message):
        FeedForwardAttention(2, 8, **{option: value})
    x, lengths, weights = batch([3], steps=3, hidden=2, attention=True)
    with pytest.raises(ValueError, match=message):
        chunked_pool(x, lengths, *weights, **{option: value})
