"""Feedback Transformer core (Fan et al., section 3.3).

At each step t the input embedding x_t^0 goes up the L layers; every layer attends to the same
memory of the last `span` steps, m_{t-span} .. m_{t-1} (the current step enters only through
the residual path). The step's memory vector is a softmax-weighted sum of all its layer
outputs, m_t = sum_{l=0..L} softmax(w)_l x_t^l, so even the lowest layer of the next step reads
the highest representations of the past. That makes the steps sequential; each is kept cheap:

- keys and values are projected once per step from m_t (shared by all layers by default;
  `shared_kv=False` gives each layer its own projection) and written into a preallocated
  buffer read through a sliding window (sliding_window.py): no step copies the memory;
- the state carries raw memory vectors, normalised when read (pre-norm), never stored normed;
- at the start of a call the carried memory's keys and values are recomputed with the current
  weights, except when acting (no gradients) with unchanged weights: then the stored ones are
  reused and the call extends the state's buffers in place (append_log.py), so a T = 1 call
  costs one step, whatever the span.

Letters: T steps, B envs, S span, L layers, G key/value groups (1 shared, else L), D d_model,
H heads, E head width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from agents.cores.append_log import AppendLog, capacity_for
from agents.cores.attention import AttentionBlock, init_value_path, split_heads
from agents.cores.checks import check_bool
from agents.cores.dropout import masks_ahead
from agents.cores.sliding_window import SlidingWindowBuffer
from agents.cores.step_linear import StepLinears, plain
from agents.cores.transformer import TransformerConfig
from agents.cores.weights_version import track_loads, weights_version


@dataclass
class FeedbackConfig(TransformerConfig):
    """The Transformer's options (span: past steps in memory, the current one not included), and:"""

    shared_kv: bool = True  # one key/value projection of the memory for all layers

    def __post_init__(self):
        super().__post_init__()
        check_bool("shared_kv", self.shared_kv)


class FeedbackState(NamedTuple):
    """Buffers of `capacity` slots; slots [end - S, end) hold the last S steps."""

    memory: torch.Tensor  # (B, capacity, D) raw memory vectors
    keys: torch.Tensor  # (B, H, G, capacity, E) keys and values of that memory ...
    values: torch.Tensor
    valid: torch.Tensor  # (B, S) bool: which of the last S steps belong to the episode running now
    end: int
    version: tuple | None  # ... made by the weights with this weights_version
    log: AppendLog  # how far these buffers have been written


class FeedbackCore(nn.Module):
    def __init__(self, input_dim: int, config: FeedbackConfig):
        super().__init__()
        c = self.config = config
        self.output_dim = c.d_model
        self.groups = 1 if c.shared_kv else c.n_layers
        self.embed = nn.Linear(input_dim, c.d_model)
        self.blocks = nn.ModuleList(
            AttentionBlock(c.d_model, c.n_heads, c.span, c.ff_width, c.dropout, c.pre_norm, c.persistent)
            for _ in range(c.n_layers)
        )
        self.memory_norm = nn.ModuleList(nn.LayerNorm(c.d_model) if c.pre_norm else nn.Identity() for _ in range(self.groups))
        self.kv = nn.ModuleList(nn.Linear(c.d_model, 2 * c.d_model) for _ in range(self.groups))
        self.layer_logits = nn.Parameter(torch.zeros(c.n_layers + 1))  # w: l = 0 is the input embedding
        self.norm_out = nn.LayerNorm(c.d_model) if c.pre_norm else nn.Identity()
        init_value_path(c.value_init, self.kv, self.blocks)
        track_loads(self)

    @property
    def layer_weights(self) -> torch.Tensor:
        """softmax(w): how much each layer (0 = input embedding) contributes to the memory."""
        return torch.softmax(self.layer_logits, dim=0)

    def initial_state(self, batch_size: int, device: torch.device | str) -> FeedbackState:
        span = self.config.span
        memory, keys, values = self._new_buffers(batch_size, capacity_for(span, 0), torch.zeros(0, device=device))
        valid = torch.zeros(batch_size, span, dtype=torch.bool, device=device)
        return FeedbackState(memory, keys, values, valid, span, None, AppendLog(span))

    def _new_buffers(self, batch: int, capacity: int, like: torch.Tensor):
        """Zeroed memory (B, capacity, D), keys and values (B, H, G, capacity, E) (heads before
        groups: see TransformerCore._new_buffers)."""
        c = self.config
        memory = like.new_zeros(batch, capacity, c.d_model)
        keys = like.new_zeros(batch, c.n_heads, self.groups, capacity, c.d_model // c.n_heads)
        return memory, keys, torch.zeros_like(keys)

    def _keys_values(self, group: int, memory: torch.Tensor, linear=plain) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, n, D) raw memory -> keys and values (B, H, n, E), normalised as they are read."""
        k, v = linear(self.kv[group], self.memory_norm[group](memory)).chunk(2, dim=-1)
        return split_heads(k, self.config.n_heads), split_heads(v, self.config.n_heads)

    def forward(self, x: torch.Tensor, state: FeedbackState, first: torch.Tensor) -> tuple[torch.Tensor, FeedbackState]:
        """x: (T, B, input_dim), first: (T, B) bool -> y: (T, B, D), the state after step T - 1."""
        steps, batch = first.shape
        run = FeedbackRun(self, state, steps, x)
        embedded = self.embed(x).unbind(0)  # T x (B, D): one backward op for all steps, not one per step
        with masks_ahead(self, steps):  # each dropout draws its T masks at once
            outputs = [run.advance(embedded[t], first[t]) for t in range(steps)]
        y = self.norm_out(torch.cat(outputs, dim=1)).transpose(0, 1)  # (T, B, D)
        return y, run.finish()

    def open(self, state: FeedbackState, steps: int) -> "FeedbackRun":
        """A call fed one step at a time, for inputs that depend on earlier outputs (acting
        with the graph kept): run.step(x_t, first_t) -> y_t, then run.finish() -> state.
        Equals forward() over the same inputs."""
        return FeedbackRun(self, state, steps, state.memory)


class FeedbackRun:
    """The state of one call over at most `steps` steps, advanced a step at a time."""

    def __init__(self, core: FeedbackCore, state: FeedbackState, steps: int, like: torch.Tensor):
        self.core, c = core, core.config
        batch, span = state.valid.shape
        self.steps, self.t = steps, 0
        self.slot = torch.arange(span, device=like.device)
        self.distance = (span - self.slot)[None, :]  # (1, S): window slot s is S - s steps back
        # The buffer index (counting the carried span from 0) where each env's episode began.
        self.episode_start = span - state.valid.sum(dim=1)  # (B,); S when nothing carried is valid
        self.version = weights_version(core)
        reuse = not torch.is_grad_enabled() and state.version == self.version  # stored keys are current
        window = slice(state.end - span, state.end)
        groups = range(core.groups)

        if reuse and state.log.can_extend(state.end, steps, state.memory.shape[1]):
            memory, keys, values, start, log = state.memory, state.keys, state.values, state.end, state.log
            self.key_buffers = [SlidingWindowBuffer(keys[:, :, g], start, span) for g in groups]
            self.value_buffers = [SlidingWindowBuffer(values[:, :, g], start, span) for g in groups]
            self.key_windows = [b.current() for b in self.key_buffers]  # (B, H, S, E) each
            self.value_windows = [b.current() for b in self.value_buffers]
        else:  # new buffers, starting with this state's memory and its keys and values
            memory, keys, values = core._new_buffers(batch, capacity_for(span, steps), like)
            memory[:, :span] = state.memory[:, window]
            start, log = span, AppendLog(span)
            self.key_buffers = [SlidingWindowBuffer(keys[:, :, g], 0, span) for g in groups]
            self.value_buffers = [SlidingWindowBuffer(values[:, :, g], 0, span) for g in groups]
            self.key_windows, self.value_windows = [], []
            for g in groups:
                if reuse:
                    k, v = state.keys[:, :, g, window], state.values[:, :, g, window]
                else:  # recomputed with the current weights (and gradients, when learning)
                    k, v = core._keys_values(g, state.memory[:, window])
                self.key_windows.append(self.key_buffers[g].write(k))
                self.value_windows.append(self.value_buffers[g].write(v))
        self.memory, self.keys, self.values, self.start, self.log = memory, keys, values, start, log
        self.weights = core.layer_weights
        self.positions = [block.positions_by_key(self.distance[0]) for block in core.blocks]  # (E, S) each, the same every step
        self.linear = StepLinears(torch.is_grad_enabled())

    def step(self, x: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """x: (B, input_dim), first: (B,) bool -> y: (B, D)."""
        return self.core.norm_out(self.advance(self.core.embed(x), first))[:, 0]

    def advance(self, embedded: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """One step from its embedding (B, D): the top layer's output (B, 1, D) before the
        final norm; the step's memory vector and its keys and values go into the buffers."""
        core, c, t = self.core, self.core.config, self.t
        if t == self.steps:
            raise RuntimeError(f"this run was opened for {self.steps} steps")
        span = c.span
        self.episode_start = torch.where(first, span + t, self.episode_start)
        visible = ((t + self.slot)[None, :] >= self.episode_start[:, None])[:, None, :]  # (B, 1, S)
        h = embedded[:, None, :]  # (B, 1, D)
        m = self.weights[0] * h
        for layer, block in enumerate(core.blocks):
            group = 0 if c.shared_kv else layer
            sinks = (self.key_buffers[group].sink(), self.value_buffers[group].sink())  # gradients straight to the buffers
            h = block(h, self.key_windows[group], self.value_windows[group], self.distance, visible, sinks, self.linear, self.positions[layer])
            m = m + self.weights[layer + 1] * h
        self.memory[:, self.start + t] = m[:, 0].detach()
        for g in range(core.groups):
            k, v = core._keys_values(g, m, self.linear)  # (B, H, 1, E) each
            self.key_windows[g] = self.key_buffers[g].write(k)
            self.value_windows[g] = self.value_buffers[g].write(v)
        self.t += 1
        return h

    def finish(self) -> FeedbackState:
        """The state after the steps taken (detached, like forward's)."""
        span, end = self.core.config.span, self.start + self.t
        self.log.end = end
        index = torch.arange(self.t, self.t + span, device=self.slot.device)  # buffer index of the last S slots
        valid = index[None, :] >= self.episode_start[:, None]
        return FeedbackState(self.memory, self.keys, self.values, valid, end, self.version, self.log)
