"""FFM core: Fast and Forgetful Memory, Morad et al., "Reinforcement Learning with Fast and
Forgetful Memory" (NeurIPS 2023; arXiv:2310.04128), the paper's cell.

Its aggregator (FFA) keeps a state S in C^(m x c) that every step decays and adds to:

    S_t = gamma * S_{t-1} + x~_t 1_c^T,    gamma[i, j] = exp(-|alpha_i|) exp(i omega_j)

alpha (m,) a decay per memory channel, omega (c,) a frequency per context channel: each channel
is a trace of its input that fades at its own rate and turns at its own speed, so the state holds
both how much and how long ago. The cell around it (the paper's equations, linear maps l1..l5):

    x~_t = l1(o_t) * sigmoid(l2(o_t))                     gated input, (m,)
    z_t  = l3([Re S_t, Im S_t])                           the state read out, (d,)
    g_t  = sigmoid(l4(o_t))
    y_t  = LayerNorm(z_t) * g_t + l5(o_t) * (1 - g_t)     gated against a skip path, (d,)

(the LayerNorm without affine weights). Initialisation, from the paper's periods: omega_j =
2 pi / P_j for periods P evenly spaced on [min_period, max_period]; |alpha| evenly spaced from
ln 2 (a channel that halves every step) to ln(100) / max_period (one that keeps 1% of an input
after max_period steps).

The paper's batched update has no episode starts inside a sequence; this core restarts the state
at each (S_t = x~_t 1^T where first[t]: linear_scan.py, which runs a call's steps one after
another on a CPU and by doubling on a GPU, without the paper's division by gamma^t that
overflows over long calls). Acting is one
multiply-add a step. The state is complex64 (complex128 for float64 weights), also under
bfloat16 autocast, where the linear maps run in bfloat16.

Letters: T steps, B envs, I input width, d d_model, m memory_size, c context_size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from agents.cores.checks import check_at_least
from agents.cores.linear_scan import linear_scan, recurrence_dtype
from agents.cores.state import register_state


@dataclass
class FFMConfig:
    d_model: int = 64  # d: the output width
    memory_size: int = 32  # m: decay channels
    context_size: int = 4  # c: frequency channels (the state is m x c complex)
    min_period: int = 1  # the frequencies start at periods evenly spaced on [min_period, max_period] steps
    max_period: int = 1024  # and the slowest decay keeps 1% of an input after max_period steps

    def __post_init__(self):
        check_at_least("d_model", self.d_model, 1)
        check_at_least("memory_size", self.memory_size, 1)
        check_at_least("context_size", self.context_size, 1)
        check_at_least("min_period", self.min_period, 1)
        check_at_least("max_period", self.max_period, self.min_period)


@register_state
class FFMState(NamedTuple):
    s: torch.Tensor  # (B, m, c, 2): the aggregator's complex state after the last step, as (real, imaginary)


class FFMCore(nn.Module):
    sequential = False  # a call's steps run side by side (one scan): packing episodes would only add padding

    def __init__(self, input_dim: int, config: FFMConfig):
        super().__init__()
        c = self.config = config
        self.output_dim = c.d_model
        m, d = c.memory_size, c.d_model
        self.pre = nn.Linear(input_dim, 2 * m + 2 * d)  # l1, l2, l5, l4 side by side: one product
        self.mix = nn.Linear(2 * m * c.context_size, d)  # l3
        slowest = math.log(100) / c.max_period
        self.alpha = nn.Parameter(torch.linspace(math.log(2), slowest, m) if m > 1 else torch.tensor([slowest]))  # (m,)
        self.omega = nn.Parameter(2 * math.pi / torch.linspace(c.min_period, c.max_period, c.context_size))  # (c,)

    def decay(self, real: torch.dtype) -> torch.Tensor:
        """gamma: (m * c,) complex, its parts in `real`, channel (i, j) at i * c + j."""
        return torch.polar(torch.exp(-self.alpha.to(real).abs())[:, None].expand(-1, self.config.context_size),
                           self.omega.to(real)[None, :].expand(self.config.memory_size, -1)).flatten()

    def initial_state(self, batch_size: int, device: torch.device | str) -> FFMState:
        c = self.config
        dtype = recurrence_dtype(self.pre.weight.dtype)
        return FFMState(torch.zeros(batch_size, c.memory_size, c.context_size, 2, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor, state: FFMState, first: torch.Tensor) -> tuple[torch.Tensor, FFMState]:
        """x: (T, B, I), first: (T, B) bool -> y: (T, B, d), the state after step T - 1 (detached)."""
        c = self.config
        steps, batch, _ = x.shape
        value, gate_in, skip, gate_out = self.pre(x).split([c.memory_size, c.memory_size, c.d_model, c.d_model], dim=-1)
        carried = torch.view_as_complex(state.s.to(recurrence_dtype(self.pre.weight.dtype)).contiguous()).flatten(1)  # (B, m * c)
        real = carried.real.dtype  # the recurrence's precision: the state's, whatever autocast computes the maps in
        into = (value * torch.sigmoid(gate_in)).to(real)  # (T, B, m): x~
        into = into[..., None].expand(-1, -1, -1, c.context_size).flatten(2)  # (T, B, m * c): x~ 1_c^T
        states = linear_scan(self.decay(real), torch.complex(into, torch.zeros_like(into)), first, carried)
        read = torch.cat([states.real, states.imag], dim=-1).to(value.dtype)  # (T, B, 2 m c) in the maps' dtype
        z = F.layer_norm(self.mix(read), (c.d_model,))
        g = torch.sigmoid(gate_out)
        y = z * g + skip * (1 - g)
        last = states[-1].view(batch, c.memory_size, c.context_size)
        return y, FFMState(torch.view_as_real(last).detach())
