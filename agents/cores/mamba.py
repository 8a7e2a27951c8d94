"""Mamba core: the selective state-space block of Gu and Dao, "Mamba: Linear-Time Sequence Modeling
with Selective State Spaces" (arXiv:2312.00752, 2023), written in PyTorch on the suite's scan.

One block, for its input u_t (D,) (the residual stream), E = expand * D inner channels and N
state units per channel:

    x_t, z_t = split(W_in LayerNorm(u_t))                      two branches of E: the input and the gate
    c_t      = SiLU(sum_{j=0..k-1} w_j * x_{t-k+1+j} + b)       causal depthwise convolution over k = d_conv steps
    delta_t  = softplus(W_up (W_down c_t) + b_delta)            (E,): a step size per channel (W_down rank R)
    B_t, C_t = W_B c_t, W_C c_t                                 (N,) each: what the state reads and what is read out
    A        = -exp(A_log)                                      (E, N): diagonal, real, negative
    h_t      = exp(delta_t A) * h_{t-1} + (delta_t B_t) * c_t   (E, N): A_bar = exp(delta A), B_bar x ~ delta B x
    y_t      = C_t h_t + D * c_t                                (E,): sum over N, and a skip per channel
    u'_t     = u_t + W_out (y_t * SiLU(z_t))

so the state keeps or forgets (delta small or large) as the step's own input decides: the
selection mechanism. The paper's initialisation: A_log = log(n + 1) for n = 0 .. N - 1 (S4D-real,
A_n = -(n + 1), the same for every channel), D = 1, b_delta the inverse softplus of a step size
drawn log-uniform on [dt_min, dt_max] per channel (at least 1e-4), W_up uniform on +-R^-1/2, the
convolution as torch's Conv1d; W_in, W_down|W_B|W_C and W_out without biases. R (dt_rank) is
ceil(D / 16) as the paper's reference code has it (0, the default); any R from 1 up (R = E is a
full-rank map through a bottleneck as wide as the output). B_bar x ~ delta B x is the paper's
simplification of the zero-order hold (its reference code makes the same).

The blocks are pre-norm with a residual path, as the paper's language model: n_layers of
u + Mamba(LayerNorm(u)) (LayerNorm where the paper uses RMSNorm), an input embedding Linear(I, D)
before them and a last LayerNorm giving the heads a normalised output.

Episode starts. At a step where `first` is set, both memories restart: the state (h_t = B_bar_t
c_t, the scan's decay into that step is 0: linear_scan.py) and the convolution's window (taps
before the start read 0, within a call and across calls: the carried window holds the last k - 1
inputs with those before the episode in progress already zeroed). So nothing before a start
reaches any output at or after it. The paper's model runs whole sequences and has neither.

How it runs. A learning call runs all its steps at once: the k taps of the convolution are k
shifted products, the scan is linear_scan's over per-step decays (real, (T, B, E N); one step
after another on a CPU, doubling rounds on a GPU), its backward a second scan run backwards in
time; no custom kernel.
The state of every step is held, (T, B, E, N), which the paper's fused kernel avoids by keeping
it in SRAM: the cost of running in plain PyTorch (docs/cores.md, "Mamba"). Acting (T = 1) is the same code: one multiply-add of the state
and the window shifted by a step. The recurrence and the window run in float32 (float64 for
float64 weights); under bfloat16 autocast the linear maps run in bfloat16.

Letters: T steps, B envs, I input width, D d_model, E inner channels (expand * D), N d_state,
k d_conv, R dt_rank, L layers.
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

DT_FLOOR = 1e-4  # the least initial step size (the reference code's dt_init_floor)


@dataclass
class MambaConfig:
    d_model: int = 64  # D: the residual stream's width and the core's output
    d_state: int = 16  # N: state units per inner channel (the paper's 16)
    d_conv: int = 4  # k: the causal convolution's taps, the current step included (the paper's 4)
    expand: int = 2  # E = expand * D inner channels (the paper's 2)
    n_layers: int = 2
    dt_rank: int = 0  # R: the rank of the step-size map; 0: ceil(d_model / 16), the paper's
    dt_min: float = 0.001  # the step sizes start log-uniform on [dt_min, dt_max] (the paper's)
    dt_max: float = 0.1

    def __post_init__(self):
        check_at_least("d_model", self.d_model, 1)
        check_at_least("d_state", self.d_state, 1)
        check_at_least("d_conv", self.d_conv, 1)
        check_at_least("expand", self.expand, 1)
        check_at_least("n_layers", self.n_layers, 1)
        check_at_least("dt_rank", self.dt_rank, 0)
        check_float("dt_min", self.dt_min, 0.0, low_open=True)
        check_float("dt_max", self.dt_max, self.dt_min, 1000.0, note="dt_min <= dt_max; exp(-1000) is 0 already: every unit forgets at once")

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model

    @property
    def rank(self) -> int:
        """R: dt_rank, or the paper's ceil(d_model / 16) for 0."""
        return self.dt_rank or math.ceil(self.d_model / 16)


@register_state
class MambaState(NamedTuple):
    h: torch.Tensor  # (B, L, E, N): each layer's state after the last step
    conv: torch.Tensor  # (B, L, k - 1, E): each layer's last k - 1 convolution inputs, oldest first, 0 before the episode


def causal_conv(x: torch.Tensor, window: torch.Tensor, first: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The depthwise causal convolution, blind to inputs before an episode start.

    x (T, B, E), window (B, k - 1, E) (the inputs before step 0, oldest first), first (T, B),
    weight (E, k) (tap j multiplies the input k - 1 - j steps back), bias (E,) -> the outputs
    (T, B, E) and the window after step T - 1 (B, k - 1, E), its entries before the episode in
    progress zeroed."""
    steps, taps = x.shape[0], weight.shape[1]
    padded = torch.cat([window.transpose(0, 1).to(x.dtype), x])  # (k - 1 + T, B, E): input t at k - 1 + t
    t = torch.arange(steps, device=x.device)[:, None]  # (T, 1)
    # the latest episode start at or before each step; -k where none in the call (every tap reads)
    start = torch.where(first, t, torch.full_like(t, -taps)).cummax(dim=0).values  # (T, B)
    out = bias + weight[:, -1] * x  # tap k - 1: the step itself
    for back in range(1, taps):  # the input `back` steps before t, read only if no start lies after it
        read = (start <= t - back)[..., None]  # (T, B, 1)
        out = out + weight[:, taps - 1 - back] * torch.where(read, padded[taps - 1 - back : taps - 1 - back + steps], 0)
    kept = (start[-1] <= steps - taps + 1 + torch.arange(taps - 1, device=x.device)[:, None])[..., None]  # (k - 1, B, 1)
    return out, torch.where(kept, padded[steps:], 0).transpose(0, 1)


class MambaMixer(nn.Module):
    """The selective SSM between W_in and W_out (the module docstring's equations)."""

    def __init__(self, c: MambaConfig):
        super().__init__()
        e, n, r = c.d_inner, c.d_state, c.rank
        self.in_proj = nn.Linear(c.d_model, 2 * e, bias=False)  # W_in: x and z side by side
        conv = nn.Conv1d(e, e, c.d_conv, groups=e)  # only for torch's initialisation of a depthwise Conv1d
        self.conv_weight = nn.Parameter(conv.weight.detach()[:, 0].clone())  # (E, k)
        self.conv_bias = nn.Parameter(conv.bias.detach().clone())  # (E,)
        self.x_proj = nn.Linear(e, r + 2 * n, bias=False)  # W_down, W_B, W_C side by side
        self.dt_proj = nn.Linear(r, e)  # W_up, b_delta
        nn.init.uniform_(self.dt_proj.weight, -r**-0.5, r**-0.5)
        dt = torch.exp(torch.rand(e) * (math.log(c.dt_max) - math.log(c.dt_min)) + math.log(c.dt_min)).clamp(min=DT_FLOOR)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus(b_delta) = dt
        self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1, dtype=torch.float32)).repeat(e, 1))  # (E, N): A = -(n + 1)
        self.D = nn.Parameter(torch.ones(e))
        self.out_proj = nn.Linear(e, c.d_model, bias=False)
        self.sizes = (e, n, r)

    def forward(self, u: torch.Tensor, h: torch.Tensor, window: torch.Tensor,
                first: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """u: (T, B, D) normed, h: (B, E, N), window: (B, k - 1, E), first: (T, B) -> W_out(y * SiLU(z))
        (T, B, D), the state after step T - 1 (B, E, N) and the window after it (B, k - 1, E)."""
        e, n, r = self.sizes
        steps, batch, _ = u.shape
        x, z = self.in_proj(u).split([e, e], dim=-1)  # (T, B, E) each
        x, new_window = causal_conv(x, window, first, self.conv_weight, self.conv_bias)
        x = F.silu(x)
        low, b, c = self.x_proj(x).split([r, n, n], dim=-1)  # (T, B, R), (T, B, N), (T, B, N)
        real = h.dtype  # the recurrence's precision: the state's, whatever autocast computes the maps in
        delta = F.softplus(self.dt_proj(low)).to(real)[..., None]  # (T, B, E, 1)
        a = -torch.exp(self.A_log.to(real))  # (E, N)
        decay = torch.exp(delta * a)  # (T, B, E, N): A_bar
        drive = delta * b.to(real)[:, :, None, :] * x.to(real)[..., None]  # (T, B, E, N): B_bar x
        states = linear_scan(decay.flatten(2), drive.flatten(2), first, h.flatten(1)).view(steps, batch, e, n)
        y = (states * c.to(real)[:, :, None, :]).sum(-1) + self.D.to(real) * x.to(real)  # (T, B, E)
        return self.out_proj(y.to(x.dtype) * F.silu(z)), states[-1], new_window.to(window.dtype)


class MambaBlock(nn.Module):
    """u + Mamba(LayerNorm(u)): pre-norm with a residual path."""

    def __init__(self, c: MambaConfig):
        super().__init__()
        self.norm = nn.LayerNorm(c.d_model)
        self.mixer = MambaMixer(c)

    def forward(self, u, h, window, first):
        y, h, window = self.mixer(self.norm(u), h, window, first)
        return u + y, h, window


class MambaCore(nn.Module):
    sequential = False  # a call's steps run side by side (one scan): packing episodes would only add padding

    def __init__(self, input_dim: int, config: MambaConfig):
        super().__init__()
        self.config = config
        self.output_dim = config.d_model
        self.embed = nn.Linear(input_dim, config.d_model)
        self.blocks = nn.ModuleList(MambaBlock(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model)  # pre-norm blocks leave the residual stream unnormalised: the heads read it normed

    def initial_state(self, batch_size: int, device: torch.device | str) -> MambaState:
        c = self.config
        dtype = recurrence_dtype(self.embed.weight.dtype)
        return MambaState(torch.zeros(batch_size, c.n_layers, c.d_inner, c.d_state, dtype=dtype, device=device),
                          torch.zeros(batch_size, c.n_layers, c.d_conv - 1, c.d_inner, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor, state: MambaState, first: torch.Tensor) -> tuple[torch.Tensor, MambaState]:
        """x: (T, B, I), first: (T, B) bool (a start restarts the state and the convolution's window)
        -> y: (T, B, D), the state after step T - 1 (detached)."""
        real = recurrence_dtype(self.embed.weight.dtype)
        u = self.embed(x)
        hs, windows = [], []
        for layer, block in enumerate(self.blocks):
            u, h, window = block(u, state.h[:, layer].to(real), state.conv[:, layer].to(real), first)
            hs.append(h)
            windows.append(window)
        return self.norm(u), MambaState(torch.stack(hs, dim=1).detach(), torch.stack(windows, dim=1).detach())
