"""LRU core: the Linear Recurrent Unit of Orvieto et al., "Resurrecting Recurrent Neural Networks
for Long Sequences" (ICML 2023, PMLR 202; arXiv:2303.06349), in the paper's deep block.

One LRU layer, for input u_t (H,) and state x_t (N,) complex:

    x_t = lambda * x_{t-1} + gamma * (B u_t),    y_t = Re(C x_t) + D * u_t
    lambda = exp(-exp(nu) + i exp(theta)),       gamma = exp(gamma_log), initially sqrt(1 - |lambda|^2)

a diagonal complex recurrence (|lambda| < 1 whatever nu), its input normalised so that a unit
near the circle, which forgets slowly, is not swamped by the sum of its inputs. Initialisation
(the paper's ring initialisation): |lambda| uniform on the ring [r_min, r_max] (in area: |lambda|^2 uniform
between r_min^2 and r_max^2), the phase uniform on [0, max_phase]; B and C complex Gaussian with
variance 1 / (2 H) and 1 / N per part, D standard Gaussian. Each block is pre-norm with a
residual path, as the paper's deep model: u + GLU(GELU(LRU(LayerNorm(u)))), the GLU a
position-wise Linear(H, 2H) whose second half gates the first; a last LayerNorm gives the heads a
normalised output, as pre-norm Transformers end.

Where an episode starts the state restarts (x_t = gamma * B u_t: linear_scan.py). A learning call
runs all its steps in one scan (linear_scan: one step after another on a CPU, doubling rounds on
a GPU); acting is one multiply-add a step. The
recurrence runs in complex64 (complex128 for float64 weights); under bfloat16 autocast the
products around it run in bfloat16 and the recurrence still in complex64 (the CPU has no
complex bfloat16).

Letters: T steps, B envs, I input width, H d_model, N state units (complex), L layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from agents.cores.checks import check_at_least, check_float
from agents.cores.linear_scan import linear_scan, recurrence_dtype
from agents.cores.state import register_state


@dataclass
class LRUConfig:
    d_model: int = 64  # H: the blocks' width and the core's output
    state_size: int = 64  # N: complex state units per layer
    n_layers: int = 1
    r_min: float = 0.9  # |lambda| starts on the ring [r_min, r_max]: the paper's long-range setting
    r_max: float = 0.999
    max_phase: float = 2 * math.pi  # the phase of lambda starts uniform on [0, max_phase]

    def __post_init__(self):
        check_at_least("d_model", self.d_model, 1)
        check_at_least("state_size", self.state_size, 1)
        check_at_least("n_layers", self.n_layers, 1)
        check_float("r_min", self.r_min, 0.0, 1.0, high_open=True)
        check_float("r_max", self.r_max, self.r_min, 1.0, low_open=True, high_open=True, note="r_min < r_max < 1")
        check_float("max_phase", self.max_phase, 0.0, low_open=True)


@register_state
class LRUState(NamedTuple):
    x: torch.Tensor  # (B, L, N, 2): each layer's complex state after the last step, as (real, imaginary)


class LRULayer(nn.Module):
    """x_t = lambda x_{t-1} + gamma B u_t, y_t = Re(C x_t) + D u_t (the module docstring)."""

    def __init__(self, width: int, units: int, c: LRUConfig):
        super().__init__()
        u1, u2 = torch.rand(units), torch.rand(units)
        modulus = torch.sqrt(u1 * (c.r_max**2 - c.r_min**2) + c.r_min**2)  # uniform on the ring, by area
        self.nu_log = nn.Parameter(torch.log(-torch.log(modulus)))  # |lambda| = exp(-exp(nu_log))
        self.theta_log = nn.Parameter(torch.log(c.max_phase * u2))  # arg lambda = exp(theta_log)
        self.gamma_log = nn.Parameter(0.5 * torch.log(1 - modulus**2))
        self.b_re = nn.Parameter(torch.randn(units, width) / math.sqrt(2 * width))  # (N, H)
        self.b_im = nn.Parameter(torch.randn(units, width) / math.sqrt(2 * width))
        self.c_re = nn.Parameter(torch.randn(width, units) / math.sqrt(units))  # (H, N)
        self.c_im = nn.Parameter(torch.randn(width, units) / math.sqrt(units))
        self.d = nn.Parameter(torch.randn(width))

    def decay(self, real: torch.dtype) -> torch.Tensor:
        """lambda: (N,) complex, its parts in `real`."""
        return torch.polar(torch.exp(-torch.exp(self.nu_log.to(real))), torch.exp(self.theta_log.to(real)))

    def forward(self, u: torch.Tensor, x: torch.Tensor, first: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """u: (T, B, H), x: (B, N) complex, first: (T, B) -> y: (T, B, H), the states (T, B, N) complex."""
        real = x.real.dtype  # the recurrence's precision: the state's, whatever autocast computes the products in
        drive = torch.complex(F.linear(u, self.b_re).to(real), F.linear(u, self.b_im).to(real))  # (T, B, N)
        drive = drive * torch.exp(self.gamma_log).to(real)
        states = linear_scan(self.decay(real), drive, first, x)  # (T, B, N)
        y = F.linear(states.real.to(u.dtype), self.c_re) - F.linear(states.imag.to(u.dtype), self.c_im) + self.d * u
        return y, states


class LRUBlock(nn.Module):
    """u + GLU(GELU(LRU(LayerNorm(u)))): the paper's deep block, pre-norm."""

    def __init__(self, c: LRUConfig):
        super().__init__()
        self.norm = nn.LayerNorm(c.d_model)
        self.lru = LRULayer(c.d_model, c.state_size, c)
        self.glu = nn.Linear(c.d_model, 2 * c.d_model)

    def forward(self, u: torch.Tensor, x: torch.Tensor, first: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, states = self.lru(self.norm(u), x, first)
        return u + F.glu(self.glu(F.gelu(y)), dim=-1), states


class LRUCore(nn.Module):
    sequential = False  # a call's steps run side by side (one scan): packing episodes would only add padding

    def __init__(self, input_dim: int, config: LRUConfig):
        super().__init__()
        self.config = config
        self.output_dim = config.d_model
        self.embed = nn.Linear(input_dim, config.d_model)
        self.blocks = nn.ModuleList(LRUBlock(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model)  # pre-norm blocks leave the residual stream unnormalised: the heads read it normed

    def initial_state(self, batch_size: int, device: torch.device | str) -> LRUState:
        dtype = recurrence_dtype(self.embed.weight.dtype)
        return LRUState(torch.zeros(batch_size, self.config.n_layers, self.config.state_size, 2, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor, state: LRUState, first: torch.Tensor) -> tuple[torch.Tensor, LRUState]:
        """x: (T, B, I), first: (T, B) bool -> y: (T, B, H), the state after step T - 1 (detached)."""
        u = self.embed(x)
        carried = torch.view_as_complex(state.x.to(recurrence_dtype(self.embed.weight.dtype)).contiguous())  # (B, L, N)
        last = []
        for layer, block in enumerate(self.blocks):
            u, states = block(u, carried[:, layer], first)
            last.append(states[-1])
        return self.norm(u), LRUState(torch.view_as_real(torch.stack(last, dim=1)).detach())
