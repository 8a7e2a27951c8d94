"""A naive Transformer, straight from the equations, for checking the real core (same weights: it
reads the parameters of the core it is given) and as a baseline of benchmarks/cores.py; and
its attention layer, which checks AttentionBlock. (The Feedback core's reference is a model of
the package: agents/cores/feedback/reference.py.)

It steps one time step at a time, keeps its memory as a tensor grown with `torch.cat`, and
recomputes every key and value from it at every step. The layer equations are written out here,
not borrowed from the cores' modules, so the comparison checks the cores' arithmetic.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def layer_norm(module, x):
    return x if isinstance(module, torch.nn.Identity) else F.layer_norm(x, x.shape[-1:], module.weight, module.bias, module.eps)


def attention_layer(block, h, k, v, distance, valid, pre_norm, heads, masks=None):
    """One layer for one step. h: (B, D); k, v: (B, n, D) memory; distance: (n,); valid: (B, n);
    masks: dropout masks (scaled by 1 / (1 - p)) for the attention weights (B, H, n [+ N]) and
    the feed-forward ReLU activations (B, F), where Fan et al. put dropout; None: no dropout."""
    weight_mask, relu_mask = masks if masks is not None else (1.0, 1.0)
    batch, width = h.shape
    e = width // heads
    x = layer_norm(block.norm_attn, h) if pre_norm else h
    q = F.linear(x, block.query.weight, block.query.bias).view(batch, heads, e)
    kh = k.view(batch, -1, heads, e).transpose(1, 2)  # (B, H, n, E)
    vh = v.view(batch, -1, heads, e).transpose(1, 2)
    scores = torch.einsum("bhe,bhne->bhn", q, kh) + torch.einsum("bhe,ne->bhn", q, block.position[distance])
    scores = scores / math.sqrt(e)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    if block.persistent is not None:
        pk, pv = block.persistent.keys * math.sqrt(e), block.persistent.values * math.sqrt(block.persistent.keys.shape[1])
        scores = torch.cat([scores, torch.einsum("bhe,hne->bhn", q, pk) / math.sqrt(e)], dim=-1)
        vh = torch.cat([vh, pv.expand(batch, -1, -1, -1)], dim=2)
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0) * weight_mask  # no visible key: attend to nothing
    context = torch.einsum("bhn,bhne->bhe", weights, vh).reshape(batch, width)
    attended = F.linear(context, block.out.weight, block.out.bias)
    ff = lambda y: F.linear(F.relu(F.linear(y, block.ff.fc1.weight, block.ff.fc1.bias)) * relu_mask, block.ff.fc2.weight, block.ff.fc2.bias)  # noqa: E731
    if getattr(block, "gate_attn", None) is not None:  # GTrXL (pre-norm): Y = g(E, ReLU(Y_bar)), E_out = g(Y, ReLU(f(LN(Y))))
        h = gru_gate(block.gate_attn, h, F.relu(attended))
        return h if block.ff is None else gru_gate(block.gate_ff, h, F.relu(ff(layer_norm(block.norm_ff, h))))
    h = h + attended
    if not pre_norm:
        h = layer_norm(block.norm_attn, h)
    if block.ff is None:
        return h
    if pre_norm:
        return h + ff(layer_norm(block.norm_ff, h))
    return layer_norm(block.norm_ff, h + ff(h))


def gru_gate(gate, x, y):
    """GTrXL's gate (Parisotto et al. 2020, arXiv:1910.06764, section 3) on the stream x and a
    sublayer's output y (after its ReLU), (B, D) each, from the six matrices and b_g of `gate`
    (agents/cores/gtrxl.py's GRUGate: W_r, W_z, W_g stacked in gate.w, U_r, U_z in gate.u)."""
    width = x.shape[-1]
    w_r, w_z, w_g = gate.w.weight[:width], gate.w.weight[width : 2 * width], gate.w.weight[2 * width :]
    u_r, u_z, u_g = gate.u.weight[:width], gate.u.weight[width:], gate.u_g.weight
    r = torch.sigmoid(y @ w_r.T + x @ u_r.T)
    z = torch.sigmoid(y @ w_z.T + x @ u_z.T - gate.bias)
    h_hat = torch.tanh(y @ w_g.T + (r * x) @ u_g.T)
    return (1 - z) * x + z * h_hat


def consecutive_steps_back(queries, keys, newest, device=None):
    """(Q, K) long: how many steps key j stands before query t when the Q queries and K keys are
    consecutive steps, the last key `newest` steps before the last query (AttentionBlock.forward's
    int distance): newest + (K - 1 - j) - (Q - 1 - t). Negative: the key is in the query's future."""
    return newest + (keys - 1 - torch.arange(keys, device=device))[None, :] - (queries - 1 - torch.arange(queries, device=device))[:, None]


def gathered_position_scores(q, position, keys, newest):
    """attention.shifted_position_scores the plain way (the cores' before 2026-12-05): q against
    every distance's embedding, (B, H, Q, P), then each query's and key's distance
    (consecutive_steps_back) gathered from it. q (B, H, Q, E), position (P, E) -> (B, H, Q, K)."""
    index = consecutive_steps_back(q.shape[-2], keys, newest, q.device).clamp(0, position.shape[0] - 1)  # (Q, K)
    return (q @ position.T).gather(-1, index.expand(*q.shape[:-1], keys))


class NaiveTransformer:
    """The Transformer one step at a time: each layer's query attends to its own input and the
    layer inputs of the previous `span` steps of the episode."""

    def __init__(self, core):
        self.core = core

    def initial_state(self, batch_size, device):
        c = self.core.config
        return torch.zeros(batch_size, c.n_layers, 0, c.d_model, device=device), torch.zeros(batch_size, 0, dtype=torch.bool, device=device)

    def __call__(self, x, state, first):
        core, c = self.core, self.core.config
        inputs, valid = state  # (B, L, n, D) past layer inputs, (B, n)
        outputs = []
        for t in range(x.shape[0]):
            valid = torch.cat([valid & ~first[t][:, None], torch.ones_like(first[t])[:, None]], dim=1)[:, -(c.span + 1) :]
            h = F.linear(x[t], core.embed.weight, core.embed.bias)
            new_inputs = []
            for index, (block, kv) in enumerate(zip(core.blocks, core.kv)):
                context = torch.cat([inputs[:, index], h[:, None]], dim=1)[:, -(c.span + 1) :]  # (B, n + 1, D)
                new_inputs.append(context)
                read = layer_norm(block.norm_attn, context) if c.pre_norm else context
                k, v = F.linear(read, kv.weight, kv.bias).chunk(2, dim=-1)
                distance = torch.arange(context.shape[1] - 1, -1, -1, device=x.device)
                h = attention_layer(block, h, k, v, distance, valid, c.pre_norm, c.n_heads)
            inputs = torch.stack(new_inputs, dim=1)[:, :, -c.span :]
            valid = valid[:, -c.span :]
            outputs.append(layer_norm(core.norm_out, h))
        return torch.stack(outputs), (inputs.detach(), valid)
