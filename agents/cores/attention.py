"""Attention pieces the Transformer and Feedback Transformer cores share.

Both cores keep a buffer of past steps in front of the current call's steps:

    buffer index:  0 .. S-1             S .. S+T-1
                   carried state        this call's steps t = 0 .. T-1

`episode_starts` gives, per step and env, the first buffer index of the current episode; a key
is visible only from there on, so nothing before a `first` leaks into the episode after it.

Letters: T steps in the call, B envs, S span (carried slots), H heads, E head width (D / H),
N persistent vectors, D model width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from agents.cores.dropout import Dropout, draw_keep
from agents.cores.dtypes import masked_score


def episode_starts(first: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(T, B) buffer index where the episode of each step began.

    first: (T, B) bool, True where step t begins an episode; valid: (B, S) bool, the carried
    slots that belong to the episode running at the start of the call (always a suffix).
    """
    steps, _ = first.shape
    span = valid.shape[1]
    carried_start = span - valid.sum(dim=1)  # (B,) first valid carried slot, S when none
    index = torch.arange(span, span + steps, device=first.device)[:, None]  # (T, 1)
    marks = torch.where(first, index, carried_start[None, :])  # (T, B)
    return torch.cummax(marks, dim=0).values


def carried_valid(starts: torch.Tensor, span: int) -> torch.Tensor:
    """(B, S) which of the last S buffer slots belong to the episode running at the call's end."""
    steps = starts.shape[0]
    index = torch.arange(steps, steps + span, device=starts.device)  # buffer index of the new slots
    return index[None, :] >= starts[-1][:, None]


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(..., L, D) -> (..., H, L, E)."""
    *lead, length, width = x.shape
    return x.view(*lead, length, heads, width // heads).transpose(-3, -2)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    position_scores: torch.Tensor,
    visible: torch.Tensor,
    persistent: tuple[torch.Tensor, torch.Tensor] | None = None,
    dropout: Dropout | None = None,
    keep: torch.Tensor | None = None,
) -> torch.Tensor:
    """Dot-product attention with relative-position scores and optional persistent vectors.

    q: (B, H, Q, E), already scaled by 1 / sqrt(E); k, v: (B, H, K, E); position_scores:
    (B, H, Q, K) q . p(distance); visible: (B, Q, K) bool; persistent: keys and values
    (H, N, E), always visible, no position term; dropout and keep: dropout on the attention
    weights, the persistent vectors' included (Fan et al.), as `dropped` applies it. Returns
    (B, H, Q, E). A query that sees nothing gets a zero vector, never NaN. (The Feedback core's
    steps do the same by hand: feedback/step.py.)

    Windowed: where visible is (B, Q, W) with W < K, query t sees keys t .. t + W - 1 only, and
    position_scores and the weights are (B, H, Q, W) (window_scores, window_context).
    """
    windowed = visible.shape[-1] < k.shape[-2]
    scores = (window_scores(q, k) if windowed else q @ k.transpose(-1, -2)).add_(position_scores)  # (B, H, Q, K or W)
    scores.masked_fill_(~visible[:, None], masked_score(scores.dtype))
    weigh = window_context if windowed else torch.matmul
    if persistent is None:  # a query that sees nothing: its context zeroed (a (Q, E) pass, not a (Q, K) one)
        context = weigh(dropped(torch.softmax(scores, dim=-1), dropout, keep), v)
        return context * visible.any(dim=-1)[:, None, :, None]
    pk, pv = persistent
    persistent_scores = torch.einsum("bhqe,hne->bhqn", q, pk)  # (B, H, Q, N)
    weights = dropped(torch.softmax(torch.cat([scores, persistent_scores], dim=-1), dim=-1), dropout, keep)  # (B, H, Q, K + N)
    context = weigh(weights[..., : scores.shape[-1]], v)
    return context + torch.einsum("bhqn,hne->bhqe", weights[..., scores.shape[-1] :], pv)


def shifted_position_scores(q: torch.Tensor, position: torch.Tensor, keys: int, newest: int) -> torch.Tensor:
    """q . p(distance) for every query and key of a call whose keys are consecutive steps, the
    last of them `newest` steps before the last query (0: its own step, as in a Transformer's
    call; 1: the step before, as in the Feedback memory): query t of Q and key j of K stand
    newest + (K - 1 - j) - (Q - 1 - t) steps apart. q (B, H, Q, E), position (P, E) by distance
    -> (B, H, Q, K); a distance past P - 1 reads row P - 1, one below 0 row 0.

    One product with K + 1 embeddings, a column per distance (newest + K - 1 down to newest - 1),
    then each query's row shifted by its place: the (Q, K + 1) product read from its element Q - 1
    at rows of K (Transformer-XL's relative shift). Not q against every distance's embedding,
    (Q, P) whatever the keys, then a gather (whose backward scatters): on an L = 1,024 episode's
    learning calls that took more time than the attention itself (docs/speed.md). The entries
    whose key is newer than newest - 1 steps before their query wrap into the row above; they are
    in that query's future, which every caller masks, and so only newest 0 or 1 is allowed."""
    if newest not in (0, 1):
        raise ValueError(f"newest must be 0 or 1 (steps from the last query back to the last key), got {newest}")
    queries = q.shape[-2]
    distance = (newest + keys - 1 - torch.arange(keys + 1, device=q.device)).clamp(0, position.shape[0] - 1)  # (K + 1,)
    by_column = q @ position[distance].T  # (B, H, Q, K + 1): column c is distance newest + K - 1 - c
    return by_column.flatten(-2)[..., queries - 1 : queries - 1 + queries * keys].unflatten(-1, (queries, keys))


def window_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q (B, H, Q, E), k (B, H, Q + W - 1, E) -> (B, H, Q, W): query t against keys t .. t + W - 1,
    one elementwise product a window slot (no (Q, K) matrix of which all but W a row are masked)."""
    queries, width = q.shape[-2], k.shape[-2] - q.shape[-2] + 1
    return torch.stack([(q * k[..., j : j + queries, :]).sum(-1) for j in range(width)], dim=-1)


def window_context(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """weights (B, H, Q, W), v (B, H, Q + W - 1, E) -> (B, H, Q, E): query t's sum of weights[j] v[t + j]."""
    queries = weights.shape[-2]
    context = weights[..., 0:1] * v[..., 0:queries, :]
    for j in range(1, weights.shape[-1]):
        context = torch.addcmul(context, weights[..., j : j + 1], v[..., j : j + queries, :])
    return context


class PersistentMemory(nn.Module):
    """N learned key and value vectors per head (the all-attention layer), reparameterised as
    k = sqrt(E) k', v = sqrt(N) v' with k' ~ N(0, 1/E), v' ~ N(0, 1/N) (Sukhbaatar et al.)."""

    def __init__(self, heads: int, head_dim: int, count: int):
        super().__init__()
        self.key_scale, self.value_scale = math.sqrt(head_dim), math.sqrt(count)
        self.keys = nn.Parameter(torch.randn(heads, count, head_dim) / math.sqrt(head_dim))
        self.values = nn.Parameter(torch.randn(heads, count, head_dim) / math.sqrt(count))

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.keys * self.key_scale, self.values * self.value_scale


def maybe_dropout(p: float) -> Dropout | None:
    """Dropout (dropout.py), or None at p = 0, which callers skip (a module call per use is a
    cost the per-step loop feels)."""
    return Dropout(p) if p > 0 else None


def dropped(x: torch.Tensor, dropout: Dropout | None, keep: torch.Tensor | None) -> torch.Tensor:
    """x after dropout: by `keep`, bool masks drawn beforehand (True: kept; the Feedback
    reference draws a call's all at once, as its fast paths do), else by `dropout`'s own draw;
    unchanged without dropout or in eval mode."""
    if keep is not None:
        return x * keep * (1.0 / (1.0 - dropout.p))
    return x if dropout is None else dropout(x)


class FeedForward(nn.Module):
    """The position-wise sublayer: Linear(D, F) -> ReLU -> dropout -> Linear(F, D); dropout
    on the ReLU activations, as Fan et al."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = maybe_dropout(dropout)

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """x (..., D) -> (..., D); keep: the ReLU activations' dropout masks (..., F), bool, drawn
        beforehand, or None (the module draws its own)."""
        hidden = F.relu(self.fc1(x), inplace=True)  # (..., F)
        return self.fc2(dropped(hidden, self.dropout, keep))


VALUE_INITS = ("pytorch", "orthogonal")


def init_value_path(how: str, kv: nn.ModuleList, blocks: nn.ModuleList) -> None:
    """Start the value half of each key/value projection (Linear(D, 2D), keys then values) and
    each attention output projection at PyTorch's default ("pytorch": uniform, std 1/sqrt(3D),
    so value then output shrinks a vector about 3 times) or orthogonal with gain 1
    ("orthogonal": norm-preserving). What attention reads from the past reaches the output
    through these two maps; with a span of 1 the Feedback Transformer is a recurrence whose
    every step passes through them, and at PyTorch's default a signal 8 steps back arrives
    about 1,000 times weaker than the current input (against about 10 times through span-8
    attention, and 100 times through an LSTM), so small-span agents barely learn from it."""
    if how == "pytorch":
        return
    with torch.no_grad():
        for projection in kv:
            nn.init.orthogonal_(projection.weight[projection.weight.shape[0] // 2 :])
        for block in blocks:
            nn.init.orthogonal_(block.out.weight)


class AttentionBlock(nn.Module):
    """One transformer layer without its key/value projection: multi-head attention with learned
    relative position embeddings on keys (and persistent vectors, which replace the feed-forward
    sublayer), then feed-forward; pre-norm or post-norm. Dropout falls where Fan et al. (and
    their code) put it: on the attention weights and on the feed-forward ReLU activations, not
    on the sublayer outputs.

    The caller projects keys and values (per layer in the Transformer, from the shared memory in
    the Feedback Transformer) and says which keys each query sees and at what distance.
    """

    def __init__(self, d_model: int, n_heads: int, max_distance: int, d_ff: int, dropout: float, pre_norm: bool, persistent: int):
        super().__init__()
        self.heads = n_heads
        self.pre_norm = pre_norm
        head_dim = d_model // n_heads
        self.query = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.position = nn.Parameter(torch.randn(max_distance + 1, head_dim) * 0.02)  # (P, E) by distance
        self.persistent = PersistentMemory(n_heads, head_dim, persistent) if persistent else None
        self.ff = None if persistent else FeedForward(d_model, d_ff, dropout)
        self.norm_attn = nn.LayerNorm(d_model)
        self.norm_ff = None if persistent else nn.LayerNorm(d_model)
        self.attention_dropout = maybe_dropout(dropout)

    def step_masks(self, steps: int, batch: int, keys: int, device: torch.device) -> tuple | None:
        """Dropout's keep masks (bool, True: kept) for `steps` steps of one query over `keys` memory
        slots: attention weights (T, B, H, keys [+ N]), then ReLU activations (T, B, F) or None
        (persistent vectors, no feed-forward), each in one draw for all steps; None in eval mode or
        without dropout. The Feedback core's paths all draw them so, layer by layer, and so drop the
        same entries from the same seed."""
        if not self.training or self.attention_dropout is None:
            return None
        p = self.attention_dropout.p
        n = keys + (self.persistent.keys.shape[1] if self.persistent is not None else 0)
        attention = draw_keep(steps, (batch, self.heads, 1, n), p, device)[:, :, :, 0]
        relu = draw_keep(steps, (batch, 1, self.ff.fc1.out_features), p, device)[:, :, 0] if self.ff is not None else None
        return attention, relu

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        """What the attention reads: the normalised input under pre-norm, the input itself under post-norm."""
        return self.norm_attn(h) if self.pre_norm else h

    def forward(self, h: torch.Tensor, k: torch.Tensor, v: torch.Tensor, distance: torch.Tensor | int, visible: torch.Tensor,
                keep: tuple | None = None) -> torch.Tensor:
        """h: (B, Q, D) layer input at the query steps; k, v: (B, H, K, E); distance: how many steps
        back each key stands from each query: (1, K) long, in [0, P - 1], when every query's row is
        the same; or an int, when the keys are consecutive steps, the last of them that many steps
        before the last query (0 or 1: shifted_position_scores); visible: (B, Q, K), or (B, Q, W)
        with W < K for windowed attention, query t seeing keys t .. t + W - 1 at distances
        distance[0] (attend). -> (B, Q, D).

        Dropout: the block's modules draw their masks as they go (the Transformer), unless `keep`
        gives them, drawn beforehand (step_masks, one step's: the Feedback reference), bool:
        attention weights (B, H, Q, K [+ N]), ReLU activations (B, Q, F) or None."""
        batch, queries, width = h.shape
        q = split_heads(self.query(self.attention_input(h)), self.heads)  # (B, H, Q, E)
        q = q * q.shape[-1] ** -0.5
        if isinstance(distance, int):  # consecutive keys: each query's row of distances shifted by one
            position_scores = shifted_position_scores(q, self.position, k.shape[-2], distance)  # (B, H, Q, K)
        else:  # one row of distances for every query: look the embeddings up
            position_scores = q @ self.position[distance[0]].T  # (B, H, Q, K or W)
        persistent = self.persistent() if self.persistent is not None else None
        keep_attention, keep_relu = (None, None) if keep is None else keep
        context = attend(q, k, v, position_scores, visible, persistent, self.attention_dropout, keep_attention)  # (B, H, Q, E)
        context = context.transpose(1, 2).reshape(batch, queries, width)
        return self.combine(h, self.out(context), keep_relu)

    def combine(self, h: torch.Tensor, attended: torch.Tensor, keep_relu: torch.Tensor | None) -> torch.Tensor:
        """The layer's output from its input h and the attention sublayer's output `attended`,
        (B, Q, D) each: residual sums around the attention and the feed-forward sublayers, norms
        before them (pre-norm) or after (post-norm). (GTrXL's gates instead: gtrxl.py.)"""
        h = h + attended
        if not self.pre_norm:
            h = self.norm_attn(h)
        if self.ff is None:
            return h
        if self.pre_norm:
            return h + self.ff(self.norm_ff(h), keep_relu)
        return self.norm_ff(h + self.ff(h, keep_relu))
