"""Reservoir Transformer core (Shen et al.): frozen random layers interspersed with trained ones.

A ReservoirCore is a TransformerCore (the same XL cache, masks, relative positions and forward)
whose layer stack also holds reservoir layers. A reservoir layer keeps its random
initialisation for ever: orthogonal projection weights (every nn.Linear weight), everything
else (biases, LayerNorms, position embeddings, persistent vectors) as PyTorch or the layer
initialises it, and requires_grad False, so no optimiser touches it. Gradients still flow
through it to the layers below, unless `backskip`: then it runs without building a graph and
hands the gradient reaching its output unchanged to its input (dy/dx = I). The paper's
backskipping learns an estimate of that gradient; the identity is the simplest estimate.

Kinds of reservoir layer:
- "transformer": a whole frozen transformer layer (attention block and its key/value
  projection), with its own slot in the cache like any attention layer;
- "ffn": FFN(LN(x)) + x, no attention (the best in the paper). It keeps no state, so it joins
  the trained layer below it (the placement always gives it one) as one layer of the stack,
  and the cache holds the attention layers only;
- "esn": a classic echo-state network with a trained readout, a different core (esn.py) that
  `make_reservoir` builds instead.

Placement (`placement`): one reservoir alternates with one trained layer, and the alternating
block sits in the middle of the trained layers, the odd one out going below it:
2 trained, 1 reservoir: T R T; 4, 2: T T R T R T; 2, 2: T R T R. `core.layout` lists it.

Letters: T steps, B envs, D d_model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import nn

from agents.cores.attention import FeedForward
from agents.cores.checks import check_at_least, check_bool, check_choice, check_positive, check_unit_interval
from agents.cores.esn import EchoStateCore
from agents.cores.transformer import TransformerConfig, TransformerCore

ReservoirKind = Literal["ffn", "transformer", "esn"]
KINDS = get_args(ReservoirKind)


@dataclass
class ReservoirConfig(TransformerConfig):
    """The Transformer's options (n_layers: the trained layers only), and:"""

    kind: ReservoirKind = "ffn"
    n_reservoir: int = 1  # frozen layers, 1 .. n_layers
    backskip: bool = False  # no backward pass through reservoir layers: the gradient skips them
    # kind "esn" only (d_model is its readout width; the other options above are unused):
    units: int = 256
    spectral_radius: float = 0.9
    leak_rate: float = 0.5  # 1: no leak; smaller: the state fades more slowly
    input_scaling: float = 1.0  # input weights and bias uniform in [-input_scaling, input_scaling]
    density: float = 0.1  # fraction of nonzero recurrent weights

    def __post_init__(self):
        super().__post_init__()
        check_choice("kind", self.kind, KINDS)
        check_at_least("n_reservoir", self.n_reservoir, 1)
        if self.n_reservoir > self.n_layers:
            raise ValueError(f"n_reservoir must be <= n_layers ({self.n_layers}), got {self.n_reservoir}")
        check_bool("backskip", self.backskip)
        check_at_least("units", self.units, 1)
        check_positive("spectral_radius", self.spectral_radius)
        check_unit_interval("leak_rate", self.leak_rate)
        check_positive("input_scaling", self.input_scaling)
        check_unit_interval("density", self.density)


def make_reservoir(input_dim: int, config: ReservoirConfig) -> nn.Module:
    """The core for `config.kind`: an echo-state network for "esn", else a ReservoirCore."""
    return EchoStateCore(input_dim, config) if config.kind == "esn" else ReservoirCore(input_dim, config)


def placement(trained: int, reservoirs: int) -> list[str]:
    """Layer roles bottom to top: the block R T R ... R in the middle, trained layers around it."""
    outside = trained - (reservoirs - 1)  # trained layers outside the alternating block, >= 1
    block = ["reservoir", "trained"] * (reservoirs - 1) + ["reservoir"]
    return ["trained"] * ((outside + 1) // 2) + block + ["trained"] * (outside // 2)


def freeze(layer: nn.Module) -> nn.Module:
    """Make `layer` a reservoir layer: orthogonal projection weights, never trained."""
    for module in layer.modules():
        if isinstance(module, nn.Linear):
            nn.init.orthogonal_(module.weight)
    return layer.requires_grad_(False)


class FeedForwardReservoir(nn.Module):
    """FFN(LN(x)) + x, whatever the core's norm placement."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.ff(self.norm(h))


class Backskip(nn.Module):
    """A frozen layer run without a graph: y = x + (f(x) - x) with the difference a constant,
    so the gradient reaching y passes to x unchanged (the upstream gradient, dy/dx = I)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        """Feeds only the layer's frozen key/value projection: no graph there either."""
        with torch.no_grad():
            return self.layer.attention_input(h)

    def forward(self, h: torch.Tensor, *attention) -> torch.Tensor:
        with torch.no_grad():
            change = self.layer(h, *attention) - h
        return h + change


class WithReservoirAbove(nn.Module):
    """A trained attention layer and the stateless reservoir layer above it, as one layer of the
    TransformerCore's stack (an AttentionBlock to the loop that runs it)."""

    def __init__(self, block: nn.Module, reservoir: nn.Module):
        super().__init__()
        self.block = block
        self.reservoir = reservoir

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        return self.block.attention_input(h)

    def forward(self, h: torch.Tensor, *attention) -> torch.Tensor:
        return self.reservoir(self.block(h, *attention))


class ReservoirCore(TransformerCore):
    """The TransformerCore with reservoir layers in its stack; `layout` gives the roles bottom to
    top. The state is the TransformerState, one cache slot per attention layer."""

    def __init__(self, input_dim: int, config: ReservoirConfig):
        layout = placement(config.n_layers, config.n_reservoir)
        attention_layers = len(layout) if config.kind == "transformer" else config.n_layers
        shared = {f.name: getattr(config, f.name) for f in dataclasses.fields(TransformerConfig)}
        super().__init__(input_dim, TransformerConfig(**{**shared, "n_layers": attention_layers}))
        self.config = config  # the stack is built; from here on n_layers means trained layers
        self.layout = layout
        for position, role in enumerate(layout):
            if role == "trained":
                continue
            if config.kind == "transformer":
                freeze(self.kv[position])
                self.blocks[position] = self._reservoir(self.blocks[position])
            else:
                below = layout[:position].count("trained") - 1  # the attention layer under it
                ffn = self._reservoir(FeedForwardReservoir(config.d_model, config.ff_width, config.dropout))
                self.blocks[below] = WithReservoirAbove(self.blocks[below], ffn)

    def _reservoir(self, layer: nn.Module) -> nn.Module:
        layer = freeze(layer)
        return Backskip(layer) if self.config.backskip else layer
