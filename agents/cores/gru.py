"""GRU core: `torch.nn.GRU` with its state zeroed where an episode begins (the cutting at episode
starts, the one-step path and the stepwise run are agents/cores/recurrent.py's).

Its state is the hidden state alone, three quarters of the LSTM's weights for the same width.
Under bfloat16 autocast on the CPU, nn.GRU and torch.gru_cell are not on autocast's list: their
products run in bfloat16 one by one (on every CPU) and their outputs are float32.

Letters: T steps, B envs, L layers, I input width, H hidden size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from agents.cores.recurrent import Carried, RecurrentConfig, RecurrentCore
from agents.cores.state import register_state


@register_state
class GRUState(NamedTuple):
    h: torch.Tensor  # (B, L, H) hidden state of each layer after the last step


class GRUCore(RecurrentCore):
    State = GRUState
    # torch's gate order: reset r, update z, candidate n; h' = (1 - z) * n + z * h, so z keeps the
    # memory and 1 - z = sigmoid(-b_z - ...) writes it: one bias does both of chrono's, b_f and b_i = -b_f
    KEEP_GATE, WRITE_GATE = 1, None

    def __init__(self, input_dim: int, config: RecurrentConfig):
        super().__init__(config)
        self.gru = nn.GRU(input_dim, config.hidden_size, config.n_layers)  # time-major
        self.init_gate_biases()

    @property
    def rnn(self) -> nn.GRU:
        return self.gru

    def fused(self, x: torch.Tensor, carried: Carried) -> tuple[torch.Tensor, Carried]:
        y, h = self.gru(x, carried[0])
        return y, (h,)

    def cell(self, x: torch.Tensor, carried: Carried, weights: list[torch.Tensor]) -> Carried:
        return (torch.gru_cell(x, carried[0], *weights),)
