"""Transformer core: Transformer-XL style memory, all steps of a call in parallel.

Each layer keeps its last `span` inputs between calls (the cache). A query at step t attends to
itself and to the `span` steps before it, of its own episode only, with a learned relative
position embedding added to the keys (one per distance 0 .. span, per layer). The cache is
inputs computed with the weights of their time, as in Transformer-XL; keys and values are
recomputed from it with the current weights, except when acting (no gradients) with weights
unchanged since they were last computed, when the stored ones are reused.

Letters: T steps, B envs, S span, L layers, D d_model, H heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from agents.cores.attention import AttentionBlock, carried_valid, episode_starts, split_heads, weights_version
from agents.cores.checks import check_at_least, check_fraction, check_heads


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

    def __post_init__(self):
        check_heads(self.d_model, self.n_heads)
        check_at_least("n_layers", self.n_layers, 1)
        check_at_least("span", self.span, 1)
        check_at_least("d_ff", self.d_ff, 0)
        check_at_least("persistent", self.persistent, 0)
        check_fraction("dropout", self.dropout)
        if not isinstance(self.pre_norm, bool):
            raise ValueError(f"pre_norm must be True or False, got {self.pre_norm!r}")

    @property
    def ff_width(self) -> int:
        return self.d_ff or 4 * self.d_model


class TransformerState(NamedTuple):
    inputs: torch.Tensor  # (B, L, S, D) each layer's input at the last S steps
    valid: torch.Tensor  # (B, S) bool: slots of the episode running now
    keys: torch.Tensor  # (B, L, S, D) keys and values of those inputs ...
    values: torch.Tensor
    version: tuple | None  # ... made by the weights with this weights_version


class TransformerCore(nn.Module):
    def __init__(self, input_dim: int, config: TransformerConfig):
        super().__init__()
        c = self.config = config
        self.output_dim = c.d_model
        self.embed = nn.Linear(input_dim, c.d_model)
        self.blocks = nn.ModuleList(
            AttentionBlock(c.d_model, c.n_heads, c.span, c.ff_width, c.dropout, c.pre_norm, c.persistent)
            for _ in range(c.n_layers)
        )
        self.kv = nn.ModuleList(nn.Linear(c.d_model, 2 * c.d_model) for _ in range(c.n_layers))
        self.norm_out = nn.LayerNorm(c.d_model) if c.pre_norm else nn.Identity()

    def initial_state(self, batch_size: int, device: torch.device | str) -> TransformerState:
        c = self.config
        zeros = torch.zeros(batch_size, c.n_layers, c.span, c.d_model, device=device)
        valid = torch.zeros(batch_size, c.span, dtype=torch.bool, device=device)
        return TransformerState(zeros, valid, zeros.clone(), zeros.clone(), None)

    def forward(self, x: torch.Tensor, state: TransformerState, first: torch.Tensor) -> tuple[torch.Tensor, TransformerState]:
        """x: (T, B, input_dim), first: (T, B) bool -> y: (T, B, D), the state after step T - 1."""
        c = self.config
        steps = x.shape[0]
        h = self.embed(x).transpose(0, 1)  # (B, T, D)
        starts = episode_starts(first, state.valid)  # (T, B)
        key_index = torch.arange(c.span + steps, device=x.device)
        distance = (c.span + torch.arange(steps, device=x.device))[:, None] - key_index[None, :]  # (T, S + T)
        visible = (distance >= 0) & (distance <= c.span) & (key_index[None, None, :] >= starts.T[:, :, None])  # (B, T, S + T)
        distance = distance.clamp(0, c.span)
        version = weights_version(self)
        reuse = not torch.is_grad_enabled() and state.version == version

        inputs, keys, values = [], [], []
        for layer, (block, kv) in enumerate(zip(self.blocks, self.kv)):
            context = torch.cat([state.inputs[:, layer], h], dim=1)  # (B, S + T, D)
            if reuse:
                k_new, v_new = kv(block.attention_input(h)).chunk(2, dim=-1)
                k = torch.cat([state.keys[:, layer], k_new], dim=1)
                v = torch.cat([state.values[:, layer], v_new], dim=1)
            else:
                k, v = kv(block.attention_input(context)).chunk(2, dim=-1)  # (B, S + T, D) each
            inputs.append(context[:, -c.span :])
            keys.append(k[:, -c.span :])
            values.append(v[:, -c.span :])
            h = block(h, split_heads(k, c.n_heads), split_heads(v, c.n_heads), distance, visible)

        y = self.norm_out(h).transpose(0, 1)  # (T, B, D)
        new_state = TransformerState(
            torch.stack(inputs, dim=1).detach(),
            carried_valid(starts, c.span),
            torch.stack(keys, dim=1).detach(),
            torch.stack(values, dim=1).detach(),
            version,
        )
        return y, new_state
