"""Echo-state core: a classic reservoir (fixed random recurrence) with a trained linear readout.

    h_t = (1 - a) h_{t-1} + a tanh(W_in x_t + W h_{t-1} + b),    y_t = readout(h_t)

W_in, W and b are drawn once and never trained (buffers, not parameters); only the readout
learns. Gradients still flow through the recurrence to whatever produced x. W is sparse: each
unit reads max(1, round(density * U)) units chosen at random (a fixed in-degree), so about
`density` of its entries are nonzero and every unit has an input. A graph in which every node has
an input has a cycle, so W is not nilpotent and can be scaled to the configured spectral radius
(the largest |eigenvalue|, computed with torch.linalg.eigvals). The leak rate a sets how fast
the state forgets: the linearised update (1 - a) I + a W has spectral radius at most
1 - a + a * spectral_radius. Built by `make_reservoir` in reservoir.py for kind "esn".

Letters: T steps, B envs, I input width, U units, D d_model (the readout width).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from agents.cores.state import register_state


class EchoStateOptions(Protocol):
    """What the echo-state core reads of its config (reservoir.py's ReservoirConfig has them, and
    builds this core for kind "esn"; naming the fields here keeps esn.py from importing it back)."""

    d_model: int
    units: int
    spectral_radius: float
    leak_rate: float
    input_scaling: float
    density: float


@register_state
class EchoState(NamedTuple):
    h: torch.Tensor  # (B, U) reservoir activations after the last step


class EchoStateCore(nn.Module):
    sequential = True  # its steps run one after another: packing episodes side by side shortens a learning call

    def __init__(self, input_dim: int, config: EchoStateOptions):
        super().__init__()
        c = self.config = config
        self.output_dim = c.d_model
        # One draw from torch's global RNG seeds all the fixed weights, so torch.manual_seed
        # decides them and nothing else consumes global random numbers in between.
        generator = torch.Generator().manual_seed(int(torch.randint(2**62, ())))
        self.register_buffer("w_in", uniform(generator, c.units, input_dim) * c.input_scaling)  # (U, I)
        self.register_buffer("bias", uniform(generator, c.units) * c.input_scaling)  # (U,)
        self.register_buffer("w", recurrent_weights(c.units, c.density, c.spectral_radius, generator))  # (U, U)
        self.readout = nn.Linear(c.units, c.d_model)

    def initial_state(self, batch_size: int, device: torch.device | str) -> EchoState:
        return EchoState(torch.zeros(batch_size, self.config.units, dtype=self.w.dtype, device=device))  # the weights' dtype

    def forward(self, x: torch.Tensor, state: EchoState, first: torch.Tensor) -> tuple[torch.Tensor, EchoState]:
        """x: (T, B, I), first: (T, B) bool -> y: (T, B, D), the state after step T - 1.

        Where first[t, b], env b's h is zeroed before step t.
        """
        leak = self.config.leak_rate
        drive = F.linear(x, self.w_in, self.bias)  # (T, B, U): the input part of every step at once
        h = state.h
        states = []
        for t in range(x.shape[0]):
            h = torch.where(first[t][:, None], 0.0, h)  # (B, U)
            h = (1 - leak) * h + leak * torch.tanh(drive[t] + h @ self.w.T)
            states.append(h)
        return self.readout(torch.stack(states)), EchoState(h.detach())


def uniform(generator: torch.Generator, *shape: int) -> torch.Tensor:
    """Uniform in [-1, 1]."""
    return torch.rand(*shape, generator=generator) * 2 - 1


def recurrent_weights(units: int, density: float, spectral_radius: float, generator: torch.Generator) -> torch.Tensor:
    """(U, U) sparse random recurrence with the given spectral radius (see the module docstring)."""
    fan_in = max(1, round(density * units))
    columns = torch.rand(units, units, generator=generator).argsort(dim=1)[:, :fan_in]  # (U, fan_in) random, distinct
    w = torch.zeros(units, units, dtype=torch.float64).scatter_(1, columns, uniform(generator, units, fan_in).double())
    return (w * (spectral_radius / torch.linalg.eigvals(w).abs().max())).float()
