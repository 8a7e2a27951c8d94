"""Feed-forward attention (Raffel & Ellis): a sequence embedded by one attention-weighted mean.

    h_t = act(W_xh x_t + b_xh)           (B, L, D) per step, no recurrence
    e_t = tanh(w_hc . h_t + b_hc)        (B, L)    one score per step
    alpha = softmax_t(e)                 over the sequence's own steps (padding masked)
    c = sum_t alpha_t h_t                (B, D)    or, for `mean`, the plain mean of h
    s = act(W_cs c + b_cs)               (B, D)
    y = act(w_sy . s + b_sy)             (B,)
As published (arXiv:1512.08756v1, section 2.1, and the authors' code, craffel/ff-attention
commit 4e196a5 "Use leaky ReLU and adam"): act is a leaky ReLU of slope 0.01 below 0
(`negative_slope`; 0 gives the seed text's plain ReLU, whose output unit has no gradient on a
sequence it predicts below 0); every weight matrix W (M x N) is drawn from N(0, 1/N) (Lasagne's
HeNormal at its default gain 1), every bias starts at 0 (b_sy too: the seed text's start at the
mean target is not in the published paper or code); D = 100.

`dense_pool` computes c exactly as written above and is the reference definition. The model
computes the same c with `chunked_pool`, which walks time `chunk` steps at a time with an
online (running-max) softmax and recomputes each chunk in the backward pass, so that forward
and backward hold O(B x chunk x D) activations, never O(B x L x D): at L = 10,000, B = 100,
D = 100 one dense (B, L, D) tensor is 400 MB, and the dense pass allocates several per update.

Letters: B sequences, L steps (the longest; shorter ones are left-padded), C input channels,
D hidden width, K steps in a chunk.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

# Steps per chunk: the fastest of 16 .. 512 at L = 2,000, B = D = 100 on a 2-core EPYC
# (benchmarks/ffattn.py --sweep-chunks, two runs: 16, 32 and 128 took 12-44% longer, 256 2.1-2.3x);
# a (B, K, D) buffer is then 2.5 MB.
DEFAULT_CHUNK = 64


def check_chunk(chunk: int) -> None:
    """Raise ValueError unless `chunk` is a whole number of steps >= 1."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a whole number of steps >= 1, got {chunk!r}")


def _real_steps(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """(B, L) bool: which steps of a batch left-padded to L steps are real."""
    return torch.arange(steps, device=lengths.device)[None, :] >= (steps - lengths)[:, None]


def check_slope(negative_slope: float) -> None:
    """Raise ValueError unless `negative_slope` is in [0, 1)."""
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)) or not 0 <= negative_slope < 1:
        raise ValueError(f"negative_slope must be a number in [0, 1) (0: ReLU), got {negative_slope!r}")


def _hidden(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, slope: float, work: torch.Tensor) -> torch.Tensor:
    """h = act(W_xh x + b_xh): (B, K, C) -> (B, K, D), written into the front of `work`."""
    batch, steps, channels = x.shape
    h = _view(work, batch * steps, weight.shape[0])
    torch.addmm(bias, x.reshape(-1, channels), weight.T, out=h)
    h = h.relu_() if slope == 0 else F.leaky_relu_(h, slope)
    return h.view(batch, steps, -1)


def _view(work: torch.Tensor, *shape: int) -> torch.Tensor:
    """The front of the flat buffer `work` as a contiguous tensor of `shape`. The chunked pass
    writes every chunk's (B, K, D) tensors into buffers made once per pass: a fresh 2.5 MB tensor
    per chunk (B = D = 100, K = 64) is memory glibc keeps handing back to the kernel and faulting
    in again, which costs as much as the arithmetic."""
    return work[: math.prod(shape)].view(shape)


def dense_pool(x, lengths, weight, bias, score_weight=None, score_bias=None, negative_slope: float = 0.0) -> torch.Tensor:
    """The reference definition of c: the paper's equations over the whole (B, L, D) at once.

    x: (B, L, C) left-padded, lengths: (B,), weight: (D, C), bias: (D,) (W_xh, b_xh);
    score_weight: (1, D), score_bias: (1,) (w_hc, b_hc), or both None for the `mean` variant
    (alpha = 1 / length on a sequence's real steps); negative_slope: act's. Padded steps have
    weight exactly 0. Returns c: (B, D)."""
    real = _real_steps(lengths, x.shape[1])  # (B, L)
    h = F.leaky_relu(x @ weight.T + bias, negative_slope)  # (B, L, D)
    if score_weight is None:
        alpha = real.to(x.dtype) / lengths[:, None]  # (B, L)
    else:
        e = torch.tanh(h @ score_weight.T + score_bias).squeeze(-1)  # (B, L)
        alpha = torch.softmax(e.masked_fill(~real, float("-inf")), dim=1)
    return (alpha[:, :, None] * h).sum(dim=1)


class _ChunkedPool(torch.autograd.Function):
    """c as dense_pool computes it, K = `chunk` steps at a time; see chunked_pool. Besides the
    inputs it keeps only (B, L) tensors for the backward pass (alpha and the scores e), and
    recomputes each chunk's h there."""

    @staticmethod
    def forward(ctx, x, lengths, weight, bias, score_weight, score_bias, slope, chunk):
        batch, steps, _ = x.shape
        real = _real_steps(lengths, steps)  # (B, L)
        acc = x.new_zeros(batch, weight.shape[0])  # (B, D)
        work = x.new_empty(batch * min(chunk, steps) * weight.shape[0])  # h of one chunk
        if score_weight is None:
            e = None
            alpha = real.to(x.dtype) / lengths[:, None]  # (B, L)
            for start in range(0, steps, chunk):
                h = _hidden(x[:, start : start + chunk], weight, bias, slope, work)  # (B, K, D)
                acc += torch.bmm(alpha[:, None, start : start + chunk], h).squeeze(1)
            c = acc
        else:
            # online softmax: acc = sum_t exp(e_t - m) h_t and s = sum_t exp(e_t - m) over the
            # real steps so far, m their running max of e; rescaled whenever m grows
            e = x.new_empty(batch, steps)  # (B, L) tanh scores, padding included
            m = x.new_full((batch,), float("-inf"))
            s = x.new_zeros(batch)
            for start in range(0, steps, chunk):
                h = _hidden(x[:, start : start + chunk], weight, bias, slope, work)  # (B, K, D)
                e[:, start : start + chunk] = torch.tanh(h @ score_weight.T + score_bias).squeeze(-1)
                scores = e[:, start : start + chunk].masked_fill(~real[:, start : start + chunk], float("-inf"))  # (B, K)
                m_new = torch.maximum(m, scores.amax(dim=1))  # amax, not max(dim=): max also finds the indices, which is slower
                # -inf while a row has seen only padding: shift by 0 there, so exp gives 0, not NaN
                shift = m_new.masked_fill(m_new == float("-inf"), 0.0)
                scale = torch.exp(m - shift)  # (B,) rescales what was summed under the old max
                p = torch.exp(scores - shift[:, None])  # (B, K)
                s = s * scale + p.sum(dim=1)
                acc = acc * scale[:, None] + torch.bmm(p[:, None, :], h).squeeze(1)
                m = m_new
            c = acc / s[:, None]
            alpha = torch.exp(e - m[:, None]).masked_fill_(~real, 0.0) / s[:, None]  # (B, L)
        ctx.chunk, ctx.slope = chunk, slope
        ctx.save_for_backward(x, weight, bias, score_weight, alpha, e, c)
        return c

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        """g = dL/dc (B, D). Per chunk: dh_t = alpha_t g + dz_t w_hc, where
        dz_t = alpha_t (g . h_t - g . c) (1 - e_t^2) is the gradient at the score before tanh;
        dpre_t = dh_t where h_t > 0, negative_slope dh_t elsewhere; the W_xh, b_xh, w_hc, b_hc and x gradients are sums of
        these over the chunk's steps. For `mean` (alpha_t = 1 / length) there is no dz term.
        Padded steps have alpha_t = 0, so they add nothing."""
        x, weight, bias, score_weight, alpha, e, c = ctx.saved_tensors
        attention = score_weight is not None
        grad_x = torch.zeros_like(x) if ctx.needs_input_grad[0] else None
        grad_weight_t, grad_bias = x.new_zeros(x.shape[-1], weight.shape[0]), torch.zeros_like(bias)  # (C, D), (D,)
        if attention:
            grad_score_weight, grad_score_bias = torch.zeros_like(score_weight), score_weight.new_zeros(1)  # (1, D), (1,)
            g_dot_c = (g * c).sum(dim=1, keepdim=True)  # (B, 1)
            dz_per_g = alpha * (1 - e * e)  # (B, L): dz_t / (g . h_t - g . c)
        batch, steps, _ = x.shape
        h_work, dh_work = x.new_empty(2, batch * min(ctx.chunk, steps) * weight.shape[0])
        for start in range(0, steps, ctx.chunk):
            xc = x[:, start : start + ctx.chunk]  # (B, K, C)
            h = _hidden(xc, weight, bias, ctx.slope, h_work)  # (B, K, D)
            dh = torch.mul(alpha[:, start : start + ctx.chunk, None], g[:, None, :], out=_view(dh_work, *h.shape))  # (B, K, D)
            if attention:
                g_dot_h = torch.bmm(g[:, None, :], h.transpose(1, 2)).squeeze(1)  # (B, K)
                dz = dz_per_g[:, start : start + ctx.chunk] * (g_dot_h - g_dot_c)  # (B, K)
                dh.addcmul_(dz[:, :, None], score_weight)
                grad_score_weight += dz.reshape(1, -1) @ h.reshape(-1, h.shape[-1])
                grad_score_bias += dz.sum()
            # through act, in place: ATen's own backward (h > 0 exactly where its input is), far faster on CPU than masked_fill or where
            if ctx.slope == 0:
                dpre = torch.ops.aten.threshold_backward.grad_input(dh, h, 0, grad_input=dh)
            else:
                dpre = torch.ops.aten.leaky_relu_backward.grad_input(dh, h, ctx.slope, True, grad_input=dh)
            dpre = dpre.view(-1, h.shape[-1])  # (B K, D)
            grad_weight_t += xc.reshape(-1, xc.shape[-1]).T @ dpre  # (C, D): faster than dpre^T @ x for small C
            grad_bias += dpre.sum(dim=0)
            if grad_x is not None:
                grad_x[:, start : start + ctx.chunk] = (dpre @ weight).view(xc.shape)
        grads = (grad_x, None, grad_weight_t.T.contiguous(), grad_bias)
        return (*grads, grad_score_weight, grad_score_bias, None, None) if attention else (*grads, None, None, None, None)


def chunked_pool(x, lengths, weight, bias, score_weight=None, score_bias=None, negative_slope: float = 0.0,
                 chunk: int = DEFAULT_CHUNK) -> torch.Tensor:
    """c: (B, D), equal to dense_pool's (same arguments) up to rounding, computed `chunk` steps at
    a time in forward and backward, so its memory is O(B x chunk x D) whatever L is."""
    check_chunk(chunk)
    check_slope(negative_slope)
    return _ChunkedPool.apply(x, lengths, weight, bias, score_weight, score_bias, float(negative_slope), chunk)


def _published_init(layer: nn.Linear) -> nn.Linear:
    """Weights from N(0, 1 / fan_in), bias 0 (the published paper's section 2.1)."""
    nn.init.normal_(layer.weight, std=1 / math.sqrt(layer.in_features))
    nn.init.zeros_(layer.bias)
    return layer


class FeedForwardAttention(nn.Module):
    """The paper's model (`mean` with attention=False); c comes from chunked_pool, `chunk` steps
    at a time, so a training update's memory does not grow with the sequence length."""

    def __init__(self, input_dim: int, hidden: int, attention: bool = True, negative_slope: float = 0.01,
                 chunk: int = DEFAULT_CHUNK):
        super().__init__()
        check_chunk(chunk)
        check_slope(negative_slope)
        self.attention, self.negative_slope, self.chunk = attention, float(negative_slope), chunk
        self.step = _published_init(nn.Linear(input_dim, hidden))
        self.score = _published_init(nn.Linear(hidden, 1)) if attention else None
        self.hidden = _published_init(nn.Linear(hidden, hidden))
        self.out = _published_init(nn.Linear(hidden, 1))

    def pool_weights(self) -> tuple:
        """(W_xh, b_xh, w_hc, b_hc), the last two None for `mean`: dense_pool's and chunked_pool's
        weight arguments."""
        score = (self.score.weight, self.score.bias) if self.attention else (None, None)
        return (self.step.weight, self.step.bias, *score)

    def head(self, c: torch.Tensor) -> torch.Tensor:
        """c: (B, D) -> predictions (B,)."""
        return F.leaky_relu(self.out(F.leaky_relu(self.hidden(c), self.negative_slope)), self.negative_slope).squeeze(-1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """x: (B, L, C) left-padded, lengths: (B,) -> predictions (B,)."""
        return self.head(chunked_pool(x, lengths, *self.pool_weights(), negative_slope=self.negative_slope, chunk=self.chunk))
