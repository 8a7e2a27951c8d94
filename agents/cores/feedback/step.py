"""One step of the Feedback Transformer's layers as plain tensor code, and its backward by hand.

The Feedback core (core.py) runs its steps one after another. Built from modules under
autograd, a step is about a hundred small operations and as many autograd nodes, and on a CPU (or
as kernel launches on a GPU) their count, not their arithmetic, sets the speed. Here a step is a
few dozen ATen calls on tensors the caller hands in:

- `layer_forward` runs one layer for one step and returns what its backward needs (a
  `LayerTape`); the model it computes is reference.py's;
- `layer_backward` walks the same layer back: input gradient by formula (layer norm and softmax
  backward by ATen's own kernels), the key and value windows' gradients added in place into the
  call's gradient buffers, each weight's gradient added in place into an accumulator (one
  (out, B) @ (B, in) product a step: at the CPU preset's sizes the gradients stay in cache, and
  no step's inputs need gathering into one product at the end, which cost more).

Shapes are static and nothing reads a value back to the host, so one layer's step traces whole
under torch.compile (fullgraph=True) and is what a CUDA graph can capture (`--cuda-graph` captures
acting's steps on a ring of fixed buffers: ring.py); a whole call is not capturable as it stands
(its window moves a slot a step, its buffers are made per call: docs/speed.md says exactly what
is and is not).

Letters: B envs, D model width, H heads, E head width (D / H), S span (window slots), N
persistent vectors per head, F feed-forward width, R rows of all steps of a call (T B).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

aten = torch.ops.aten
EPS = 1e-5  # nn.LayerNorm's default, which every norm of the core uses
# Norms of inputs in these dtypes compute in float32: statistics rounded to bfloat16 cost the
# backward most of its digits where a row's mean is large beside its spread (x - mean cancels).
NARROW = (torch.bfloat16, torch.float16)


class LayerWeights(NamedTuple):
    """One layer's weights as a call uses them (some derived with autograd once per call)."""

    norm_attn_w: Tensor  # pre-norm: normalises the layer input; post-norm: the attention residual
    norm_attn_b: Tensor
    query_w: Tensor  # (D, D), scaled by E^-0.5 (so is the bias)
    query_b: Tensor
    out_w: Tensor  # (D, D)
    out_b: Tensor
    positions: Tensor  # (S [+ 1], E) the position embedding of window slot s (S - s steps back) [, then the kept slot's: row 0]
    persistent_k: Tensor | None  # (H, N, E) scaled persistent keys and values, or None
    persistent_v: Tensor | None
    norm_ff_w: Tensor | None  # the feed-forward sublayer, None with persistent vectors
    norm_ff_b: Tensor | None
    fc1_w: Tensor | None  # (F, D)
    fc1_b: Tensor | None
    fc2_w: Tensor | None  # (D, F)
    fc2_b: Tensor | None


class LayerTape(NamedTuple):
    """What one layer's step keeps for its backward (None where the variant has no such value)."""

    h: Tensor  # (B, D) layer input
    stats_a: tuple | None  # pre-norm: (mean, rstd) of the attention norm of h
    a: Tensor  # (B, D) what the query reads: norm(h) (pre) or h (post)
    q: Tensor  # (B, D) scaled query
    p: Tensor  # (B, H, S [+ 1] [+ N]) attention weights over the window [, the kept slot] [, persistent] (softmax output, times "anything seen")
    pd: Tensor  # p after dropout (p itself without)
    c: Tensor  # (B, D) attention context
    z: Tensor  # (B, D) h + attention output
    stats_z: tuple | None  # post-norm: (mean, rstd) of norm(z)
    h_mid: Tensor  # (B, D) after the attention sublayer
    f: Tensor | None  # (B, D) the feed-forward input
    stats_f: tuple | None  # pre-norm: (mean, rstd) of norm(h_mid)
    u: Tensor | None  # (B, F) ReLU output ...
    ud: Tensor | None  # ... after dropout
    z2: Tensor | None  # (B, D) h_mid + feed-forward output
    stats_z2: tuple | None  # post-norm: (mean, rstd) of norm(z2)


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """x (R, D) -> normalised (R, D) in x's dtype, (mean, rstd) (R, 1) each (float32 for a NARROW x)."""
    if x.dtype in NARROW:
        y, mean, rstd = aten.native_layer_norm(x.float(), [x.shape[-1]], weight.float(), bias.float(), EPS)
        return y.to(x.dtype), (mean, rstd)
    y, mean, rstd = aten.native_layer_norm(x, [x.shape[-1]], weight, bias, EPS)
    return y, (mean, rstd)


def _layer_norm_backward(grad: Tensor, x: Tensor, stats: tuple, weight: Tensor, bias: Tensor | None, mask: list[bool]) -> tuple:
    """native_layer_norm_backward, in float32 for a NARROW x (as layer_norm ran): the input's
    gradient in x's dtype, the weight's and bias's in float32."""
    if x.dtype not in NARROW:
        return aten.native_layer_norm_backward(grad, x, [x.shape[-1]], stats[0], stats[1], weight, bias, mask)
    dx, dw, db = aten.native_layer_norm_backward(grad.float(), x.float(), [x.shape[-1]], stats[0], stats[1], weight.float(),
                                                 None if bias is None else bias.float(), mask)
    return None if dx is None else dx.to(x.dtype), dw, db


def layer_norm_input_grad(grad: Tensor, x: Tensor, stats: tuple, weight: Tensor) -> Tensor:
    """The gradient at the input x of layer_norm, from the gradient at its output."""
    return _layer_norm_backward(grad, x, stats, weight, None, [True, False, False])[0]


def layer_norm_grads(grad: Tensor, x: Tensor, stats: tuple, weight: Tensor, bias: Tensor, acc_w: Tensor, acc_b: Tensor) -> Tensor:
    """layer_norm backwards: the gradient at the input x; its weight's and bias's are added into acc_w, acc_b."""
    dx, dw, db = _layer_norm_backward(grad, x, stats, weight, bias, [True, True, True])
    acc_w.add_(dw)
    acc_b.add_(db)
    return dx


def add_product(acc: Tensor, a: Tensor, b: Tensor) -> None:
    """acc += a @ b. In one in-place product where the dtypes agree; where acc is wider (float32
    gradients of a bfloat16 call), the product in the factors' dtype, then added in: a BLAS
    product's output takes its factors' dtype on every device, the sum over steps stays wide."""
    if acc.dtype == a.dtype:
        acc.addmm_(a, b)
    else:
        acc.add_(torch.mm(a, b))


def linear_grads(grad: Tensor, x: Tensor, acc_w: Tensor, acc_b: Tensor) -> None:
    """Add a Linear's weight and bias gradients, from its input x (R, in) and output gradient (R, out)."""
    add_product(acc_w, grad.t(), x)
    acc_b.add_(grad.sum(0))


class KeptRead(NamedTuple):
    """The kept slot (reference.py's keep_slot) as one layer's step reads it: one more key and
    value per env and head beside the window, at position row S of `positions` (the reference's
    row 0: no window slot reads it). The backward adds its key and value gradients into
    grad_keys and grad_values (None in a forward)."""

    keys: Tensor  # (B, H, E) of k_{t-1}
    values: Tensor  # (B, H, E)
    bias: Tensor  # (B, 1, 1) 0 where k_{t-1} belongs to the episode running, dtypes.masked_score where not
    grad_keys: Tensor | None = None  # (B, H, E) accumulators
    grad_values: Tensor | None = None


def layer_forward(
    h: Tensor, k_t: Tensor, v: Tensor, bias: Tensor, seen: Tensor, w: LayerWeights, masks: tuple | None, pre_norm: bool,
    kept: KeptRead | None = None,
) -> tuple[Tensor, LayerTape]:
    """One layer, one step. h (B, D) the layer input; k_t (B, H, E, S) the memory window's keys,
    transposed, and v (B, H, S, E) its values (a one-row product is fastest when the other
    factor's rows run along the output, so the forward pass reads keys as (E, S); the run's
    buffers keep values so too, and v is their transposed view); bias (B, 1, S)
    0 where a slot is visible, dtypes.masked_score where not; seen (B, 1, 1) 1.0 where any slot is visible (else the attention reads nothing, not a uniform mean); masks:
    dropout masks, scaled, (attention (B, H, S [+ 1] [+ N]), ReLU (B, F)) or None; kept: the kept
    slot, read after the window (its position row positions[S]), or None -> (B, D), tape."""
    batch, width = h.shape
    heads, span, head_width = v.shape[1], v.shape[2], v.shape[3]
    read = span + (kept is not None)  # the slots before the persistent vectors: the window [, the kept one]
    if pre_norm:
        a, stats_a = layer_norm(h, w.norm_attn_w, w.norm_attn_b)
    else:
        a, stats_a = h, None
    q = torch.addmm(w.query_b, a, w.query_w.t())  # (B, D)
    rows = q.view(batch * heads, 1, head_width)  # one query row per env and head
    scores = (torch.mm(rows.view(-1, head_width), w.positions[:span].t()).view(batch, heads, span) + bias).view(-1, 1, span)  # position terms and mask
    scores = torch.baddbmm(scores, rows, k_t.flatten(0, 1)).view(batch, heads, span)  # (B, H, S)
    if kept is not None:  # q . (k + position row) of the kept slot, masked as its episode says
        kept_scores = (q.view(batch, heads, head_width) * (kept.keys + w.positions[span])).sum(-1) + kept.bias.view(batch, 1)  # (B, H)
        scores = torch.cat([scores, kept_scores[..., None]], dim=-1)
    if w.persistent_k is not None:  # always visible, no position term
        persistent_scores = torch.matmul(rows.view(batch, heads, 1, head_width), w.persistent_k.transpose(-1, -2))
        p = torch.softmax(torch.cat([scores, persistent_scores.view(batch, heads, -1)], dim=-1), dim=-1)
    else:
        p = torch.softmax(scores, dim=-1) * seen
    pd = p * masks[0] if masks is not None else p
    c = torch.bmm(pd[..., :span].reshape(-1, 1, span), v.flatten(0, 1)).view(batch, heads, 1, head_width)
    if kept is not None:
        c = c + (pd[..., span, None] * kept.values)[:, :, None]
    if w.persistent_k is not None:
        c = c + torch.matmul(pd[..., None, read:], w.persistent_v)
    c = c.view(batch, width)
    z = torch.addmm(w.out_b, c, w.out_w.t()) + h
    if pre_norm:
        h_mid, stats_z = z, None
    else:
        h_mid, stats_z = layer_norm(z, w.norm_attn_w, w.norm_attn_b)
    f = stats_f = u = ud = z2 = stats_z2 = None
    out = h_mid
    if w.fc1_w is not None:
        if pre_norm:
            f, stats_f = layer_norm(h_mid, w.norm_ff_w, w.norm_ff_b)
        else:
            f = h_mid
        u = torch.relu(torch.addmm(w.fc1_b, f, w.fc1_w.t()))  # (B, F)
        ud = u * masks[1] if masks is not None else u
        out = z2 = torch.addmm(w.fc2_b, ud, w.fc2_w.t()) + h_mid
        if not pre_norm:
            out, stats_z2 = layer_norm(z2, w.norm_ff_w, w.norm_ff_b)
    return out, LayerTape(h, stats_a, a, q, p, pd, c, z, stats_z, h_mid, f, stats_f, u, ud, z2, stats_z2)


def layer_backward(
    grad: Tensor, k: Tensor, v_t: Tensor, grad_k_t: Tensor, grad_v_t: Tensor, seen: Tensor, w: LayerWeights,
    tape: LayerTape, masks: tuple | None, pre_norm: bool, acc: LayerWeights, kept: KeptRead | None = None,
) -> Tensor:
    """layer_forward backwards: grad (B, D) at the layer output -> the gradient at its input h.
    k (B, H, S, E) the window's keys and v_t (B, H, E, S) its values transposed (the layouts that
    make backward's one-row products fast); the window's key and value gradients are added into
    grad_k_t and grad_v_t (B, H, E, S), views of the call's gradient buffers, the kept slot's (where
    the step read one) into its grad_keys and grad_values, and the weights' gradients into `acc`
    (shaped like w)."""
    batch, width = grad.shape
    heads, span, head_width = k.shape[1], k.shape[2], k.shape[3]
    read = span + (kept is not None)
    d_mid = grad
    if w.fc1_w is not None:
        if pre_norm:
            dz2 = grad
        else:
            dz2 = layer_norm_grads(grad, tape.z2, tape.stats_z2, w.norm_ff_w, w.norm_ff_b, acc.norm_ff_w, acc.norm_ff_b)
        linear_grads(dz2, tape.ud, acc.fc2_w, acc.fc2_b)
        dud = torch.mm(dz2, w.fc2_w)  # (B, F)
        if masks is not None:
            dud = dud * masks[1]
        du = aten.threshold_backward(dud, tape.u, 0)
        linear_grads(du, tape.f, acc.fc1_w, acc.fc1_b)
        df = torch.mm(du, w.fc1_w)
        if pre_norm:
            d_mid = layer_norm_grads(df, tape.h_mid, tape.stats_f, w.norm_ff_w, w.norm_ff_b, acc.norm_ff_w, acc.norm_ff_b) + dz2
        else:
            d_mid = df + dz2
    if pre_norm:
        dz = d_mid
    else:
        dz = layer_norm_grads(d_mid, tape.z, tape.stats_z, w.norm_attn_w, w.norm_attn_b, acc.norm_attn_w, acc.norm_attn_b)
    linear_grads(dz, tape.c, acc.out_w, acc.out_b)
    dc = torch.mm(dz, w.out_w).view(batch, heads, 1, head_width)
    dpd = torch.bmm(dc.view(-1, 1, head_width), v_t.flatten(0, 1)).view(batch, heads, span)  # (B, H, S)
    grad_v_t.addcmul_(dc.transpose(-1, -2), tape.pd[..., None, :span])  # (B, H, E, 1) * (B, H, 1, S)
    if kept is not None:
        dc_rows = dc.view(batch, heads, head_width)
        dpd = torch.cat([dpd, (dc_rows * kept.values).sum(-1, keepdim=True)], dim=-1)
        kept.grad_values.addcmul_(dc_rows, tape.pd[..., span, None])
    if w.persistent_k is not None:
        dpd = torch.cat([dpd, torch.matmul(dc, w.persistent_v.transpose(-1, -2)).view(batch, heads, -1)], dim=-1)
        acc.persistent_v.add_(torch.einsum("bhn,bhe->hne", tape.pd[..., read:], dc.view(batch, heads, head_width)))
    if masks is not None:
        dpd = dpd * masks[0]
    if w.persistent_k is None:
        dpd = dpd * seen
    ds = aten._softmax_backward_data(dpd, tape.p, -1, tape.p.dtype)  # (B, H, S [+ N])
    ds_keys = ds[..., None, :span]  # (B, H, 1, S)
    rows = tape.q.view(-1, head_width)  # (B H, E)
    grad_k_t.addcmul_(tape.q.view(batch, heads, head_width, 1), ds_keys)
    add_product(acc.positions[:span], ds_keys.reshape(-1, span).t(), rows)
    dq = torch.bmm(ds_keys.reshape(-1, 1, span), k.flatten(0, 1)).view(-1, head_width)  # (B H, E)
    dq = dq.addmm_(ds_keys.reshape(-1, span), w.positions[:span])
    if kept is not None:  # the kept slot's score q . (k + positions[S])
        ds_kept = ds[..., span, None]  # (B, H, 1)
        kept.grad_keys.addcmul_(ds_kept, tape.q.view(batch, heads, head_width))
        acc.positions[span].add_((ds_kept * tape.q.view(batch, heads, head_width)).sum((0, 1)))
        dq = dq + (ds_kept * (kept.keys + w.positions[span])).view(-1, head_width)
    if w.persistent_k is not None:
        dq = dq + torch.matmul(ds[..., None, read:], w.persistent_k).view(-1, head_width)
        acc.persistent_k.add_(torch.einsum("bhn,bhe->hne", ds[..., read:], rows.view(batch, heads, head_width)))
    dq = dq.view(batch, width)
    linear_grads(dq, tape.a, acc.query_w, acc.query_b)
    da = torch.mm(dq, w.query_w)
    if pre_norm:
        return layer_norm_grads(da, tape.h, tape.stats_a, w.norm_attn_w, w.norm_attn_b, acc.norm_attn_w, acc.norm_attn_b) + dz
    return da + dz


class GroupWeights(NamedTuple):
    """A key/value projection of the memory (shared by all layers, or one per layer)."""

    norm_w: Tensor | None  # pre-norm: the memory is normalised as it is read; None under post-norm
    norm_b: Tensor | None
    kv_w: Tensor  # (2 D, D): keys, then values
    kv_b: Tensor


def project(w: GroupWeights, m: Tensor) -> tuple[Tensor, tuple | None]:
    """Raw memory (..., D) -> keys and values (..., 2 D), and the norm's (mean, rstd) if any."""
    if w.norm_w is None:
        return torch.nn.functional.linear(m, w.kv_w, w.kv_b), None
    normed, stats = layer_norm(m, w.norm_w, w.norm_b)
    return torch.nn.functional.linear(normed, w.kv_w, w.kv_b), stats


def projection_gradients(w: GroupWeights, memory: Tensor, grad_kv: Tensor) -> GroupWeights:
    """The projection's weight gradients over every slot a call read: memory (B, R, D) raw,
    grad_kv (B, 2 D, R) at the keys and values of its R slots (slots last, as the backward sums
    them).

    One product over all B R rows: M = sum_r grad_kv[r]^T x[r], (2 D, D), x the memory
    normalised before the norm's scale and shift (the raw memory where there is no norm), and g =
    sum_r grad_kv[r]. The rest follows from M and g, with no second product over the rows (the
    norm's own backward takes one, grad_kv @ kv_w):
    - d kv_w = M * norm_w + g norm_b^T   (the keys and values read x * norm_w + norm_b)
    - d norm_w = sum_k kv_w[k] * M[k]    (= sum_r (grad_kv[r] @ kv_w) * x[r])
    - d norm_b = g @ kv_w,  d kv_b = g."""
    batch, rows, width = memory.shape
    x = memory
    if w.norm_w is not None:  # ones and zeros as scale and shift: ATen's kernel with them ran twice as fast as without
        x = torch.nn.functional.layer_norm(memory, (width,), torch.ones_like(w.norm_w), torch.zeros_like(w.norm_b), EPS)
    product = grad_kv.transpose(0, 1).reshape(2 * width, batch * rows) @ x.reshape(batch * rows, width)  # M (2 D, D)
    g = grad_kv.sum((0, 2))  # (2 D,)
    if w.norm_w is None:
        return GroupWeights(None, None, product, g)
    return GroupWeights((w.kv_w * product).sum(0), g @ w.kv_w, product * w.norm_w + torch.outer(g, w.norm_b), g)
