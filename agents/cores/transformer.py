"""Transformer core: Transformer-XL style memory, all steps of a call in parallel.

Each layer keeps its last `span` inputs between calls (the cache). A query at step t attends to
itself and to the `span` steps before it, of its own episode only, with a learned relative
position embedding added to the keys (one per distance 0 .. span, per layer). The cache is
inputs computed with the weights of their time, as in Transformer-XL; keys and values are
recomputed from it with the current weights, except when acting (no gradients) with weights
unchanged since acting last computed them (a learning call stores none): then the stored ones
are reused and the call extends the state's buffers in place (append_log.py) instead of copying
them.

`gating="gru"` makes each layer GTrXL's (gtrxl.py: Parisotto et al. 2020): a GRU-type gate in place
of each residual sum. The cache, masks and positions are the same.

Letters: T steps, B envs, S span, L layers, D d_model, H heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from agents.cores.append_log import AppendLog, capacity_for
from agents.cores.attention import VALUE_INITS, carried_valid, episode_starts, init_value_path, split_heads
from agents.cores.checks import check_at_least, check_bool, check_choice, check_float, check_fraction, check_heads
from agents.cores.gtrxl import GATINGS, attention_block
from agents.cores.weights_version import track_loads, weights_version
from agents.cores.state import register_state


# A call whose keys (S + T) number at least this many times a query's window (S + 1) attends over
# windows (attention.attend): each query's S + 1 keys, not a (T, S + T) matrix all but S + 1 of
# whose columns are masked. Measured (one thread, B 64, 4 heads of 16, forward and backward of the
# attention): windows took 0.20x the full matrix's time at S = 2, T = 136, 0.29x at S = 16, T = 257,
# 0.57x at S = 16, T = 136 and 0.67x at S = 32, T = 257, but 2.4x at S = 16, T = 32 (docs/speed.md).
WINDOWED_FROM = 8

# A call over the full matrix longer than this runs each layer in chunks of this many queries,
# each over the keys up to its last query (_by_query_chunks): the keys after a query are in its
# future, so one (T, K) matrix spends about half its work on weights of 0. Measured (one thread,
# B 64, span 513, 2 layers, 4 heads of 16, a learning call of T = 545 from an empty memory, forward
# and backward, beside two training runs): 7.0 s in one call, 5.0 s in chunks of 128, 3.5-3.7 s
# in chunks of 64, 3.7-4.1 s of 32; at T = 288, 2.4 s, 1.6 s and 1.5 s.
QUERY_CHUNK = 64


def first_seen_key(starts: torch.Tensor) -> int:
    """The first of a call's S + T keys that some query sees: min(starts) ((T, B) episode starts),
    as a query sees keys from its episode's start on. The keys before it belong to no query's
    episode, so attending over them adds weights of exactly 0: a call skips them. With a span that
    covers long episodes they are most of the carried slots (a learning call that follows the
    episode starts from an empty state: all S of them). Read back on the CPU only; on an
    accelerator it would wait for the queue (a host sync), so there every call reads all S + T."""
    return int(starts.min()) if starts.device.type == "cpu" else 0


@dataclass
class TransformerConfig:
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    span: int = 64  # past steps a query sees besides its own
    d_ff: int = 0  # feed-forward width; 0 means 4 * d_model
    dropout: float = 0.0
    pre_norm: bool = True  # False: post-norm
    persistent: int = 0  # > 0: all-attention layers, this many persistent vectors per head, no feed-forward
    value_init: str = "pytorch"  # "orthogonal": value and output projections start orthogonal (attention.py)
    # "gru": GTrXL (Parisotto et al. 2020), a GRU-type gate in place of each residual sum, a ReLU on
    # each sublayer's output before it (gtrxl.py); pre-norm only. "none": the residual sums
    gating: str = "none"
    gate_bias: float = 2.0  # b_g, the gates' initial bias: z starts near sigmoid(-b_g), a fresh block near the identity

    def __post_init__(self):
        check_heads(self.d_model, self.n_heads)
        check_at_least("n_layers", self.n_layers, 1)
        check_at_least("span", self.span, 1)
        check_at_least("d_ff", self.d_ff, 0)
        check_at_least("persistent", self.persistent, 0)
        check_fraction("dropout", self.dropout)
        check_bool("pre_norm", self.pre_norm)
        check_choice("value_init", self.value_init, VALUE_INITS)
        check_choice("gating", self.gating, GATINGS)
        check_float("gate_bias", self.gate_bias, -50.0, 50.0, note="z starts near sigmoid(-gate_bias); past 50 it starts shut or open for good")
        if self.gating != "none" and not self.pre_norm:
            raise ValueError(f"gating={self.gating!r} needs pre_norm=True (GTrXL's identity-map reordering), got pre_norm=False")

    @property
    def ff_width(self) -> int:
        return self.d_ff or 4 * self.d_model


@register_state
class TransformerState(NamedTuple):
    """Buffers of `capacity` slots; slots [end - S, end) hold the last S steps."""

    inputs: torch.Tensor  # (B, L, capacity, D) each layer's input
    keys: torch.Tensor  # (B, H, L, capacity, E) keys and values of those inputs ...
    values: torch.Tensor
    valid: torch.Tensor  # (B, S) bool: which of the last S steps belong to the episode running now
    end: int
    version: tuple | None  # ... made by the weights with this weights_version
    log: AppendLog  # how far these buffers have been written


class TransformerCore(nn.Module):
    sequential = False  # its steps run side by side: packing episodes would only add padding (agents/learners/episode_packing.py)
    skips_outputs = True  # forward's outputs_from saves work (its top layer's queries), not only outputs (agents/model/policy.py)

    def __init__(self, input_dim: int, config: TransformerConfig):
        super().__init__()
        c = self.config = config
        self.output_dim = c.d_model
        self.embed = nn.Linear(input_dim, c.d_model)
        self.blocks = nn.ModuleList(
            attention_block(c.d_model, c.n_heads, c.span, c.ff_width, c.dropout, c.pre_norm, c.persistent, c.gating, c.gate_bias)
            for _ in range(c.n_layers)
        )
        self.kv = nn.ModuleList(nn.Linear(c.d_model, 2 * c.d_model) for _ in range(c.n_layers))
        self.norm_out = nn.LayerNorm(c.d_model) if c.pre_norm else nn.Identity()
        init_value_path(c.value_init, self.kv, self.blocks)
        track_loads(self)

    def initial_state(self, batch_size: int, device: torch.device | str) -> TransformerState:
        """Empty memory in the weights' dtype."""
        span = self.config.span
        like = torch.zeros(0, dtype=self.embed.weight.dtype, device=device)
        inputs, keys, values = self._new_buffers(batch_size, capacity_for(span, 0), like)
        valid = torch.zeros(batch_size, span, dtype=torch.bool, device=device)
        return TransformerState(inputs, keys, values, valid, span, None, AppendLog(span))

    def _new_buffers(self, batch: int, capacity: int, like: torch.Tensor, key_capacity: int | None = None):
        """Zeroed inputs (B, L, capacity, D), keys and values (B, H, L, key_capacity, E) (default:
        capacity; 0 where none are stored): with heads before layers, one layer's (B, H) blocks
        are evenly strided, so attention reads them in place (a batched matmul cannot flatten
        (B, H) otherwise, and would copy the window)."""
        c = self.config
        layers = len(self.blocks)  # (a reservoir core's config counts its trained layers only)
        inputs = like.new_zeros(batch, layers, capacity, c.d_model)
        keys = like.new_zeros(batch, c.n_heads, layers, capacity if key_capacity is None else key_capacity, c.d_model // c.n_heads)
        return inputs, keys, torch.zeros_like(keys)

    def _draws_dropout(self) -> bool:
        """Dropout in training draws its masks over a call's full matrix: such a call keeps it whole
        (no windows, no chunks of queries), so its draws are the ones made before either existed."""
        return self.training and self.config.dropout > 0

    def _windowed(self, steps: int) -> bool:
        """Whether a call of `steps` steps attends over each query's window (WINDOWED_FROM)."""
        span = self.config.span
        return WINDOWED_FROM * (span + 1) <= span + steps and not self._draws_dropout()

    def _by_query_chunks(self, block: nn.Module, h: torch.Tensor, k: torch.Tensor, v: torch.Tensor, distance: torch.Tensor | int,
                         visible: torch.Tensor, carried: int, first_query: int = 0) -> torch.Tensor:
        """block(h, k, v, distance, visible) for the queries from `first_query` on, (B, T, D) ->
        (B, T - first_query, D): h (B, T, D); k and v (B, H, carried + T, E), the first `carried`
        of them carried slots, or, for a windowed call (one row of distances, a tensor), query t's
        window from key t on. A call over the full matrix (not windowed) runs its queries in
        chunks of QUERY_CHUNK, each over the keys up to its last query's own (so each chunk's keys,
        too, end at its last query: distance 0); one that draws dropout runs whole."""
        if first_query:  # the queries before it are asked for nothing (forward's outputs_from)
            h, visible = h[:, first_query:], visible[:, first_query:]
            if isinstance(distance, int):
                carried += first_query  # query t's own key is now carried + t
            else:
                k, v = k[:, :, first_query:], v[:, :, first_query:]
        steps = h.shape[1]
        if steps <= QUERY_CHUNK or not isinstance(distance, int) or self._draws_dropout():
            return block(h, k, v, distance, visible)
        chunks = []
        for begin in range(0, steps, QUERY_CHUNK):
            end = min(begin + QUERY_CHUNK, steps)
            keys = carried + end  # query t's own key is carried + t; those after it it never sees
            chunks.append(block(h[:, begin:end], k[:, :, :keys], v[:, :, :keys], distance, visible[:, begin:end, :keys]))
        return torch.cat(chunks, dim=1)

    def _visible(self, starts: torch.Tensor, steps: int, seen_from: int = 0, windowed: bool | None = None) -> tuple[torch.Tensor | int, torch.Tensor]:
        """Which keys each query sees, and at what distance (AttentionBlock.forward): starts (T, B)
        -> distance 0 (the keys consecutive steps, the last the last query's own) and visible
        (B, T, S + T - seen_from) over the call's keys from index `seen_from` on (of S carried
        slots, then T new; first_seen_key); or, for a call much longer than the span
        (WINDOWED_FROM) without dropout drawing masks of the full width, each query's own S + 1
        keys: distance (1, S + 1), visible (B, T, S + 1) (attention.attend, windowed), whatever
        `seen_from`. `windowed`: the caller's _windowed(steps)."""
        span, device = self.config.span, starts.device
        if self._windowed(steps) if windowed is None else windowed:
            slot = torch.arange(span + 1, device=device)  # window slot j of query t: key t + j, span - j steps back
            visible = (torch.arange(steps, device=device)[:, None] + slot)[None] >= starts.T[:, :, None]  # (B, T, S + 1)
            return (span - slot)[None], visible
        key_index = torch.arange(seen_from, span + steps, device=device)
        back = (span + torch.arange(steps, device=device))[:, None] - key_index[None, :]  # (T, S + T) steps from query to key
        visible = (back >= 0) & (back <= span) & (key_index[None, None, :] >= starts.T[:, :, None])  # (B, T, S + T)
        return 0, visible

    def forward(self, x: torch.Tensor, state: TransformerState, first: torch.Tensor,
                outputs_from: int = 0) -> tuple[torch.Tensor, TransformerState]:
        """x: (T, B, input_dim), first: (T, B) bool -> y: (T - outputs_from, B, D), the outputs of
        steps outputs_from .. T - 1, and the state after step T - 1.

        The steps before `outputs_from` give no output (a gradient window's history, which carries
        no loss: agents/learners/window.py). A layer's outputs at every step are the next layer's
        keys, but the top layer's are nobody's: it attends from the asked steps only. With a
        window that follows long episodes that is most of a learning call's queries, and about
        half its work in a two-layer core (docs/speed.md)."""
        c = self.config
        steps, batch = first.shape
        if not 0 <= outputs_from < steps:
            raise ValueError(f"outputs_from must be in [0, {steps}) for a call of {steps} steps, got {outputs_from}")
        span = c.span
        h = self.embed(x).transpose(0, 1)  # (B, T, D)
        starts = episode_starts(first, state.valid)  # (T, B)
        windowed = self._windowed(steps)
        seen_from = 0 if windowed else first_seen_key(starts)  # keys before it: in no query's episode
        distance, visible = self._visible(starts, steps, seen_from, windowed)
        version = weights_version(self)
        # Keys stored by a learning call would be stale after its optimiser step: not stored,
        # the state says so (version None), and the next call recomputes them.
        store = not torch.is_grad_enabled()
        reuse = store and state.version == version  # stored keys are current
        carried = slice(state.end - span, state.end)

        if reuse and state.log.can_extend(state.end, steps, state.inputs.shape[2]):
            inputs, keys, values, start, log = state.inputs, state.keys, state.values, state.end, state.log
        else:  # new buffers, starting with this state's window
            capacity = capacity_for(span, steps)
            inputs, keys, values = self._new_buffers(batch, capacity, x, capacity if store else 0)
            inputs[:, :, :span] = state.inputs[:, :, carried]
            if reuse:
                keys[:, :, :, :span] = state.keys[:, :, :, carried]
                values[:, :, :, :span] = state.values[:, :, :, carried]
            start, log = span, AppendLog(span)
        new, window = slice(start, start + steps), slice(start - span, start + steps)
        seen = slice(start - span + seen_from, start + steps)  # the keys attention reads

        for layer, (block, kv) in enumerate(zip(self.blocks, self.kv)):
            if reuse:  # only the new steps' keys and values, written beside the stored ones
                k, v = kv(block.attention_input(h)).chunk(2, dim=-1)
                keys[:, :, layer, new] = split_heads(k, c.n_heads)
                values[:, :, layer, new] = split_heads(v, c.n_heads)
                k, v = keys[:, :, layer, seen], values[:, :, layer, seen]  # (B, H, S + T - seen_from, E)
            else:  # all of them, with the current weights (and gradients, when learning)
                # The carried steps apart: their inputs take no gradient, so backward skips the
                # (B S, 2D) @ (2D, D) product that would compute one only to drop it. (Read from
                # the state, which this call does not write: backward needs them as they were.)
                # A call that stores keys stores all S; one that does not projects the seen ones.
                kept = carried if store else slice(state.end - span + seen_from, state.end)
                carried_inputs = state.inputs[:, layer, kept].to(h.dtype)  # (a state made in another dtype: cast)
                carried_kv, new_kv = kv(block.attention_input(carried_inputs)), kv(block.attention_input(h))
                k, v = torch.cat([carried_kv, new_kv], dim=1).chunk(2, dim=-1)  # (B, S + T, D) each, less the unseen
                k, v = split_heads(k, c.n_heads), split_heads(v, c.n_heads)
                if store:
                    keys[:, :, layer, window] = k.detach()
                    values[:, :, layer, window] = v.detach()
                    k, v = k[:, :, seen_from:], v[:, :, seen_from:]
            inputs[:, layer, new] = h.detach()
            first_query = outputs_from if layer == len(self.blocks) - 1 else 0
            h = self._by_query_chunks(block, h, k, v, distance, visible, span - seen_from, first_query)

        log.end = start + steps
        y = self.norm_out(h).transpose(0, 1)  # (T - outputs_from, B, D)
        return y, TransformerState(inputs, keys, values, carried_valid(starts, span), start + steps, version if store else None, log)
