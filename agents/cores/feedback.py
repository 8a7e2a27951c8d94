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
  weights, except when acting (no gradients) with unchanged weights, when the stored ones are
  reused: then a T = 1 call costs one step, whatever the span.

Letters: T steps, B envs, S span, L layers, G key/value groups (1 shared, else L), D d_model,
H heads, E head width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from agents.cores.attention import AttentionBlock, carried_valid, episode_starts, split_heads, weights_version
from agents.cores.sliding_window import SlidingWindowBuffer
from agents.cores.transformer import TransformerConfig


@dataclass
class FeedbackConfig(TransformerConfig):
    """The Transformer's options (span: past steps in memory, the current one not included), and:"""

    shared_kv: bool = True  # one key/value projection of the memory for all layers

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.shared_kv, bool):
            raise ValueError(f"shared_kv must be True or False, got {self.shared_kv!r}")


class FeedbackState(NamedTuple):
    memory: torch.Tensor  # (B, S, D) raw memory vectors of the last S steps
    valid: torch.Tensor  # (B, S) bool: slots of the episode running now
    keys: torch.Tensor  # (B, G, S, D) keys and values of that memory ...
    values: torch.Tensor
    version: tuple | None  # ... made by the weights with this weights_version


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

    @property
    def layer_weights(self) -> torch.Tensor:
        """softmax(w): how much each layer (0 = input embedding) contributes to the memory."""
        return torch.softmax(self.layer_logits, dim=0)

    def initial_state(self, batch_size: int, device: torch.device | str) -> FeedbackState:
        c = self.config
        memory = torch.zeros(batch_size, c.span, c.d_model, device=device)
        kv = torch.zeros(batch_size, self.groups, c.span, c.d_model, device=device)
        valid = torch.zeros(batch_size, c.span, dtype=torch.bool, device=device)
        return FeedbackState(memory, valid, kv, kv.clone(), None)

    def _keys_values(self, group: int, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, n, D) raw memory -> keys and values (B, n, D), normalised as they are read."""
        return self.kv[group](self.memory_norm[group](memory)).chunk(2, dim=-1)

    def forward(self, x: torch.Tensor, state: FeedbackState, first: torch.Tensor) -> tuple[torch.Tensor, FeedbackState]:
        """x: (T, B, input_dim), first: (T, B) bool -> y: (T, B, D), the state after step T - 1."""
        c = self.config
        steps, batch = first.shape
        heads, span = c.n_heads, c.span
        embedded = self.embed(x)  # (T, B, D)
        starts = episode_starts(first, state.valid)  # (T, B)
        slot = torch.arange(span, device=x.device)
        distance = (span - slot)[None, :]  # (1, S): window slot s is S - s steps back
        version = weights_version(self)
        reuse = not torch.is_grad_enabled() and state.version == version

        key_buffers, value_buffers, key_windows, value_windows = [], [], [], []
        for group in range(self.groups):
            if reuse:
                k, v = state.keys[:, group], state.values[:, group]
            else:
                k, v = self._keys_values(group, state.memory)
            keys = SlidingWindowBuffer(batch, heads, span + steps, c.d_model // heads, span, x)
            values = SlidingWindowBuffer(batch, heads, span + steps, c.d_model // heads, span, x)
            key_windows.append(keys.write(split_heads(k, heads)))  # (B, H, S, E): step 0's window
            value_windows.append(values.write(split_heads(v, heads)))
            key_buffers.append(keys)
            value_buffers.append(values)

        weights = self.layer_weights
        new_memory = x.new_empty(steps, batch, c.d_model)
        outputs = []
        for t in range(steps):
            visible = ((t + slot)[None, :] >= starts[t][:, None])[:, None, :]  # (B, 1, S)
            h = embedded[t][:, None, :]  # (B, 1, D)
            memory = weights[0] * h
            for layer, block in enumerate(self.blocks):
                group = 0 if c.shared_kv else layer
                h = block(h, key_windows[group], value_windows[group], distance, visible)
                memory = memory + weights[layer + 1] * h
            outputs.append(h)
            new_memory[t] = memory[:, 0].detach()
            for group in range(self.groups):
                k, v = self._keys_values(group, memory)  # (B, 1, D) each
                key_windows[group] = key_buffers[group].write(split_heads(k, heads))
                value_windows[group] = value_buffers[group].write(split_heads(v, heads))

        y = self.norm_out(torch.cat(outputs, dim=1)).transpose(0, 1)  # (T, B, D)
        memory = torch.cat([state.memory, new_memory.transpose(0, 1)], dim=1)[:, -span:]
        new_state = FeedbackState(
            memory,
            carried_valid(starts, span),
            torch.stack([merge_heads(b.buffer[:, :, -span:]) for b in key_buffers], dim=1),
            torch.stack([merge_heads(b.buffer[:, :, -span:]) for b in value_buffers], dim=1),
            version,
        )
        return y, new_state


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, S, E) -> (B, S, H * E)."""
    batch, heads, length, width = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * width)
