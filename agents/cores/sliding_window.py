"""A preallocated buffer written one step at a time, read through a sliding window, with
gradients: the Feedback Transformer's memory of keys and values.

Writing into a tensor that earlier steps read would make autograd refuse the backward pass (the
reads saved views of it, and an in-place write bumps its version). With gradients on,
`write` writes outside autograd's view and returns the window as a fresh tensor on the same
storage; each window's gradient goes into a gradient buffer of the same shape (readers may add
theirs straight into it, `sink()`, which saves a temporary the size of the window per read),
and the write's backward hands the written slots their sum. Backward reaches a write only after every later read of its
slots (each later step depends on it), so that sum is complete when it is taken. Without
gradients, a write is a plain copy and the window a view. Either way no step copies the memory:
a step costs its own keys and values, whatever the span.
"""

from __future__ import annotations

import torch


class GradientSink:
    """Where a reader of a window (or of its transpose) puts the window's gradient, when that
    is an outer product a^T g (a one-row matmul's): kept, then added into the buffer's gradient
    together with the other readers' of the same window, as one batched matmul with inner size
    the number of readers, when the write that made the window runs its backward (flush). The
    layers of a Feedback step all read one window: one pass over its gradient instead of one
    per layer."""

    def __init__(self, target: torch.Tensor, pending: list):
        self.target, self.pending = target, pending

    def transpose(self) -> "GradientSink":
        return GradientSink(self.target.transpose(-1, -2), self.pending)

    def add_outer(self, a: torch.Tensor, grad: torch.Tensor) -> None:
        """target (..., K, M) += a^T grad, for a (..., 1, K) and grad (..., 1, M), later."""
        self.pending.append((self.target, a, grad))


def flush(pending: list) -> None:
    """Add the kept outer products into their targets, one batched matmul per target."""
    by_target: dict[tuple, list] = {}
    for target, a, grad in pending:
        by_target.setdefault((target.data_ptr(), target.shape, target.stride()), []).append((target, a, grad))
    pending.clear()
    for entries in by_target.values():
        target = entries[0][0]
        a = torch.cat([a for _, a, _ in entries], dim=-2)  # (..., n, K)
        grad = torch.cat([g for _, _, g in entries], dim=-2)  # (..., n, M)
        target.view(-1, *target.shape[-2:]).baddbmm_(a.transpose(-1, -2).flatten(0, -3), grad.flatten(0, -3))


class _WriteAndWindow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, new, buffer, grad_buffer, start, window, pending):
        ctx.set_materialize_grads(False)  # readers that add into sink() send no gradient here
        length = new.shape[2]
        buffer[:, :, start : start + length] = new
        ctx.grad_buffer, ctx.start, ctx.length, ctx.window, ctx.pending = grad_buffer, start, length, window, pending
        view = buffer[:, :, start + length - window : start + length]
        # a new tensor on the same storage: the buffer's version counter is not shared
        return torch.empty(0, dtype=buffer.dtype, device=buffer.device).set_(
            view.untyped_storage(), view.storage_offset(), view.shape, view.stride()
        )

    @staticmethod
    def backward(ctx, grad_window):
        end = ctx.start + ctx.length
        flush(ctx.pending)  # every later read of these slots has run its backward by now
        if grad_window is not None:
            ctx.grad_buffer[:, :, end - ctx.window : end] += grad_window
        return ctx.grad_buffer[:, :, ctx.start : end].clone(), None, None, None, None, None


class SlidingWindowBuffer:
    """Slots (B, H, capacity, E) of `buffer`, filled left to right from slot `filled`; each write
    returns the last `window` slots. The buffer may be a view into a larger state tensor."""

    def __init__(self, buffer: torch.Tensor, filled: int, window: int):
        self.buffer = buffer
        self.filled = filled
        self.window = window
        self.grad_buffer = torch.zeros_like(buffer) if torch.is_grad_enabled() else None
        self.pending: list = []  # the sinks' outer products not yet added into grad_buffer

    def current(self) -> torch.Tensor:
        """The window (B, H, window, E) ending at the last slot written (a view, no gradients)."""
        return self.buffer[:, :, self.filled - self.window : self.filled]

    def sink(self) -> GradientSink | None:
        """Where a reader of the current window may put its gradient (into the view of the
        gradient buffer shaped like the window), instead of returning it through autograd;
        None without gradients."""
        if self.grad_buffer is None:
            return None
        return GradientSink(self.grad_buffer[:, :, self.filled - self.window : self.filled], self.pending)

    def write(self, new: torch.Tensor) -> torch.Tensor:
        """Append new (B, H, n, E); return the window (B, H, window, E) ending with it."""
        n = new.shape[2]
        if self.grad_buffer is None:
            self.buffer[:, :, self.filled : self.filled + n] = new
            self.filled += n
            return self.current()
        out = _WriteAndWindow.apply(new, self.buffer, self.grad_buffer, self.filled, self.window, self.pending)
        self.filled += n
        return out
