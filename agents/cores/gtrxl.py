"""GTrXL: the gated attention block of Parisotto et al., "Stabilizing Transformers for
Reinforcement Learning" (ICML 2020, arXiv:1910.06764), the Transformer core's `gating="gru"`.

GTrXL changes two things in a Transformer-XL layer. The identity-map reordering moves the layer
norm onto each sublayer's input, leaving a path from a layer's input to its output that passes
through no norm: that is the pre-norm AttentionBlock already has (so gating requires pre_norm).
And the gating layer replaces each residual sum x + y, the sublayer's output y having passed
through a ReLU first (the paper's section 3, with E the layer's input, M the memory):

    Y_bar = RelativeMultiHeadAttention(LayerNorm([StopGrad(M), E]))
    Y     = g_MHA(E, ReLU(Y_bar))
    E_bar = f(LayerNorm(Y))                                  the position-wise feed-forward
    E_out = g_MLP(Y, ReLU(E_bar))

where the gate g(x, y) is the GRU-type gate (x the stream, y the sublayer's output):

    r     = sigmoid(W_r y + U_r x)
    z     = sigmoid(W_z y + U_z x - b_g)
    h_hat = tanh(W_g y + U_g (r * x))
    g     = (1 - z) * x + z * h_hat

Each gate has its own six D x D matrices (no biases) and its own b_g (D,). b_g starts at
`gate_bias` (2, the paper's "gated identity initialisation"): z then starts near sigmoid(-2) =
0.12, so a fresh block passes its input through almost unchanged and the agent first learns as
a reactive policy, the memory's share growing as z does. With persistent vectors (the
all-attention layer: no feed-forward sublayer) the block has the attention's gate only.

Letters: B envs, Q query steps, D model width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from agents.cores.attention import AttentionBlock

GATINGS = ("none", "gru")  # the Transformer core's `gating`: residual sums, or GTrXL's GRU-type gate


class GRUGate(nn.Module):
    """g(x, y) = (1 - z) * x + z * h_hat (the module docstring's equations): W_r, W_z, W_g held as
    one (3D, D) map of y, U_r, U_z as one (2D, D) map of x, U_g on its own (it reads r * x)."""

    def __init__(self, d_model: int, gate_bias: float):
        super().__init__()
        self.w = nn.Linear(d_model, 3 * d_model, bias=False)  # W_r, W_z, W_g
        self.u = nn.Linear(d_model, 2 * d_model, bias=False)  # U_r, U_z
        self.u_g = nn.Linear(d_model, d_model, bias=False)  # U_g
        self.bias = nn.Parameter(torch.full((d_model,), float(gate_bias)))  # b_g

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x: (..., D) the stream, y: (..., D) the sublayer's output (after its ReLU) -> (..., D)."""
        wr, wz, wg = self.w(y).chunk(3, dim=-1)  # (..., D) each
        ur, uz = self.u(x).chunk(2, dim=-1)
        r = torch.sigmoid(wr + ur)
        z = torch.sigmoid(wz + uz - self.bias.to(uz.dtype))  # (the bias in the call's dtype under autocast)
        h_hat = torch.tanh(wg + self.u_g(r * x))
        return x + z * (h_hat - x)  # (1 - z) x + z h_hat


class GatedAttentionBlock(AttentionBlock):
    """AttentionBlock (pre-norm) with GTrXL's gates in place of its residual sums: ReLU on each
    sublayer's output, then g(stream, that) (the module docstring). Keys, values, masks, dropout
    and the caller's contract are AttentionBlock's."""

    def __init__(self, d_model: int, n_heads: int, max_distance: int, d_ff: int, dropout: float, pre_norm: bool, persistent: int,
                 gate_bias: float):
        if not pre_norm:
            raise ValueError("gating='gru' needs pre_norm=True (GTrXL's identity-map reordering), got pre_norm=False")
        super().__init__(d_model, n_heads, max_distance, d_ff, dropout, pre_norm, persistent)
        self.gate_attn = GRUGate(d_model, gate_bias)
        self.gate_ff = None if persistent else GRUGate(d_model, gate_bias)

    def combine(self, h: torch.Tensor, attended: torch.Tensor, keep_relu: torch.Tensor | None) -> torch.Tensor:
        """Y = g_MHA(E, ReLU(Y_bar)); E_out = g_MLP(Y, ReLU(f(LayerNorm(Y)))). (B, Q, D) each."""
        h = self.gate_attn(h, F.relu(attended))
        if self.ff is None:
            return h
        return self.gate_ff(h, F.relu(self.ff(self.norm_ff(h), keep_relu)))


def attention_block(d_model: int, n_heads: int, max_distance: int, d_ff: int, dropout: float, pre_norm: bool, persistent: int,
                    gating: str, gate_bias: float) -> AttentionBlock:
    """The Transformer core's layer for `gating`: AttentionBlock ("none") or GatedAttentionBlock ("gru")."""
    if gating == "none":
        return AttentionBlock(d_model, n_heads, max_distance, d_ff, dropout, pre_norm, persistent)
    if gating == "gru":
        return GatedAttentionBlock(d_model, n_heads, max_distance, d_ff, dropout, pre_norm, persistent, gate_bias)
    raise ValueError(f"gating must be one of {list(GATINGS)}, got {gating!r}")
