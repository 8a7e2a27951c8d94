"""LSTM core: `torch.nn.LSTM` with its state zeroed where an episode begins (the cutting at
episode starts, the one-step path and the stepwise run are agents/cores/recurrent.py's).

Letters: T steps, B envs, L layers, I input width, H hidden size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from agents.cores.recurrent import Carried, RecurrentConfig, RecurrentCore


class LSTMState(NamedTuple):
    h: torch.Tensor  # (B, L, H) hidden state of each layer after the last step
    c: torch.Tensor  # (B, L, H) cell state


class LSTMCore(RecurrentCore):
    State = LSTMState

    def __init__(self, input_dim: int, config: RecurrentConfig):
        super().__init__(config)
        self.lstm = nn.LSTM(input_dim, config.hidden_size, config.n_layers)  # time-major

    @property
    def rnn(self) -> nn.LSTM:
        return self.lstm

    def fused(self, x: torch.Tensor, carried: Carried) -> tuple[torch.Tensor, Carried]:
        y, (h, c) = self.lstm(x, carried)
        return y, (h, c)

    def cell(self, x: torch.Tensor, carried: Carried, weights: list[torch.Tensor]) -> Carried:
        return torch.lstm_cell(x, carried, *weights)
