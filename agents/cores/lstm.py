"""LSTM core: `torch.nn.LSTM` with its state zeroed where an episode begins (the cutting at
episode starts, the one-step path and the stepwise run are agents/cores/recurrent.py's).

Under bfloat16 autocast on a CPU without a bfloat16 LSTM kernel (agents/cores/cpu_kernels.py),
the fused pass over several steps runs in float32 with autocast off, its outputs and state then
cast to bfloat16 as the kernel's would be, so what follows is unchanged. One-step pieces and
acting use torch.lstm_cell, which runs under autocast on every CPU.

Letters: T steps, B envs, L layers, I input width, H hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from agents.cores.cpu_kernels import bf16_lstm_missing
from agents.cores.dtypes import exact
from agents.cores.recurrent import Carried, RecurrentConfig, RecurrentCore
from agents.cores.state import register_state


@dataclass
class LSTMConfig(RecurrentConfig):
    """The LSTM starts with torch's gate biases. Chrono's (`gate_init=chrono`) carries the bit
    on the recall task further (every seed to L = 32 or more, torch's to 16, one seed to 8) but halves the
    water maze's return (0.84 against 1.74, 5 seeds each), and the corridor, the maze and the
    easy maze tell them apart on neither side: one measure each, so the tie keeps torch's
    (experiments/lstm_default.py; docs/cores.md). Runs from 2026-11-27 to 2026-12-06 started
    from chrono's by default, and their configs name it."""


@register_state
class LSTMState(NamedTuple):
    h: torch.Tensor  # (B, L, H) hidden state of each layer after the last step
    c: torch.Tensor  # (B, L, H) cell state


class LSTMCore(RecurrentCore):
    State = LSTMState
    KEEP_GATE, WRITE_GATE = 1, 0  # torch's gate order: input i, forget f, cell g, output o

    def __init__(self, input_dim: int, config: RecurrentConfig):
        super().__init__(config)
        self.lstm = nn.LSTM(input_dim, config.hidden_size, config.n_layers)  # time-major
        self.init_gate_biases()

    @property
    def rnn(self) -> nn.LSTM:
        return self.lstm

    def fused(self, x: torch.Tensor, carried: Carried) -> tuple[torch.Tensor, Carried]:
        if not bf16_lstm_missing(x.device):
            y, (h, c) = self.lstm(x, carried)
            return y, (h, c)
        dtype = self.lstm.weight_ih_l0.dtype  # float32, or a cast core's bfloat16 (ATen's kernel)
        with exact(x.device):
            y, (h, c) = self.lstm(x.to(dtype), (carried[0].to(dtype), carried[1].to(dtype)))
        return y.bfloat16(), (h.bfloat16(), c.bfloat16())  # what the bfloat16 kernel gives

    def cell(self, x: torch.Tensor, carried: Carried, weights: list[torch.Tensor]) -> Carried:
        return torch.lstm_cell(x, carried, *weights)
