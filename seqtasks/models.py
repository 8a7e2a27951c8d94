"""The models of a seqtasks run: any agents/cores core with a token embedding and an output
head, or the feed-forward attention models (ffattn.py) for the long-term memory problems.

  TokenModel        tokens (T, B) -> logits (T, B, V): embedding -> core -> linear head.
  SequenceRegressor x (B, L, C) -> (B,): the core reads each sequence in blocks of `bptt` steps
                    (memory carried between blocks, gradients truncated there, as in the
                    stream tasks), a linear head reads its output at the last step.
A core takes the fields of the config its own config has (d_model, n_layers, n_heads, span,
d_ff, dropout; lstm, gru and mlp take d_model as hidden_size), then the --core-opt overrides.

Letters: T steps, B batch rows, V output tokens, L sequence steps, C input channels.
"""

from __future__ import annotations

import torch
from torch import nn

from agents.cores import CORES, core_options, make_core
from seqtasks.ffattn import FeedForwardAttention

SEQUENCE_ONLY = ("ffattn", "mean")
MODELS = (*CORES, *SEQUENCE_ONLY)


def core_settings(config, overrides: dict) -> dict:
    """The options core `config.core` is built with: its config's fields taken from `config`,
    then `overrides` (from --core-opt)."""
    from_config = dict(
        d_model=config.d_model, hidden_size=config.d_model, n_layers=config.n_layers, n_heads=config.n_heads,
        span=config.span, d_ff=config.d_ff, dropout=config.dropout,
    )
    allowed = core_options(config.core)
    return {**{k: v for k, v in from_config.items() if k in allowed}, **overrides}


class TokenModel(nn.Module):
    def __init__(self, core: str, options: dict, n_inputs: int, n_outputs: int, embed_dim: int):
        super().__init__()
        self.embed = nn.Embedding(n_inputs, embed_dim)
        self.core = make_core(core, embed_dim, **options)
        self.head = nn.Linear(self.core.output_dim, n_outputs)

    def initial_state(self, batch_size: int, device: torch.device):
        return self.core.initial_state(batch_size, device)

    def forward(self, tokens: torch.Tensor, state, first: torch.Tensor):
        """tokens, first: (T, B) -> logits (T, B, V), the core's state after the last step."""
        y, state = self.core(self.embed(tokens), state, first)
        return self.head(y), state


class SequenceRegressor(nn.Module):
    def __init__(self, core: str, options: dict, input_dim: int, mean_target: float, block: int):
        super().__init__()
        self.block = block
        self.core = make_core(core, input_dim, **options)
        self.head = nn.Linear(self.core.output_dim, 1)
        nn.init.constant_(self.head.bias, mean_target)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """x: (B, L, C) left-padded, lengths: (B,) -> predictions (B,)."""
        batch, steps, _ = x.shape
        x = x.transpose(0, 1)  # (L, B, C)
        first = torch.arange(steps, device=x.device)[:, None] == (steps - lengths)[None, :]  # (L, B)
        state = self.core.initial_state(batch, x.device)
        for start in range(0, steps, self.block):
            y, state = self.core(x[start : start + self.block], state, first[start : start + self.block])
        return self.head(y[-1]).squeeze(-1)


def build_model(config, task, core_overrides: dict) -> nn.Module:
    """The model `config.core` for `task` (see the module docstring)."""
    if config.core not in MODELS:
        raise ValueError(f"unknown core {config.core!r}; choose from {sorted(MODELS)}")
    if task.kind == "tokens":
        if config.core in SEQUENCE_ONLY:
            raise ValueError(
                f"core {config.core!r} embeds a whole sequence in one vector, so it runs only the long-term "
                f"problems (adding, multiplication, xor), not {config.task!r}"
            )
        options = core_settings(config, core_overrides)
        return TokenModel(config.core, options, len(task.input_tokens), len(task.output_tokens), config.d_model)
    if config.core in SEQUENCE_ONLY:
        if core_overrides:
            raise ValueError(f"core {config.core!r} takes no --core-opt options (its width is --d-model), got {sorted(core_overrides)}")
        return FeedForwardAttention(2, config.d_model, attention=config.core == "ffattn", negative_slope=config.negative_slope)
    return SequenceRegressor(config.core, core_settings(config, core_overrides), 2, task.mean_target, config.bptt)
