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


class _WriteAndWindow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, new, buffer, grad_buffer, start, window):
        ctx.set_materialize_grads(False)  # readers that add into sink() send no gradient here
        length = new.shape[2]
        buffer[:, :, start : start + length] = new
        ctx.grad_buffer, ctx.start, ctx.length, ctx.window = grad_buffer, start, length, window
        view = buffer[:, :, start + length - window : start + length]
        # a new tensor on the same storage: the buffer's version counter is not shared
        return torch.empty(0, dtype=buffer.dtype, device=buffer.device).set_(
            view.untyped_storage(), view.storage_offset(), view.shape, view.stride()
        )

    @staticmethod
    def backward(ctx, grad_window):
        end = ctx.start + ctx.length
        if grad_window is not None:
            ctx.grad_buffer[:, :, end - ctx.window : end] += grad_window
        return ctx.grad_buffer[:, :, ctx.start : end].clone(), None, None, None, None


class SlidingWindowBuffer:
    """Slots (B, H, capacity, E) of `buffer`, filled left to right from slot `filled`; each write
    returns the last `window` slots. The buffer may be a view into a larger state tensor."""

    def __init__(self, buffer: torch.Tensor, filled: int, window: int):
        self.buffer = buffer
        self.filled = filled
        self.window = window
        self.grad_buffer = torch.zeros_like(buffer) if torch.is_grad_enabled() else None

    def current(self) -> torch.Tensor:
        """The window (B, H, window, E) ending at the last slot written (a view, no gradients)."""
        return self.buffer[:, :, self.filled - self.window : self.filled]

    def sink(self) -> torch.Tensor | None:
        """Where a reader of the current window may add its gradient directly (a view of the
        gradient buffer shaped like the window), instead of returning it through autograd;
        None without gradients."""
        if self.grad_buffer is None:
            return None
        return self.grad_buffer[:, :, self.filled - self.window : self.filled]

    def write(self, new: torch.Tensor) -> torch.Tensor:
        """Append new (B, H, n, E); return the window (B, H, window, E) ending with it."""
        n = new.shape[2]
        if self.grad_buffer is None:
            self.buffer[:, :, self.filled : self.filled + n] = new
            self.filled += n
            return self.current()
        out = _WriteAndWindow.apply(new, self.buffer, self.grad_buffer, self.filled, self.window)
        self.filled += n
        return out
