"""LSTM core: `torch.nn.LSTM` with its state zeroed where an episode begins.

nn.LSTM runs a whole sequence in one call but cannot reset part of the batch mid-sequence. So a
chunk is cut at the steps where some env begins an episode, and each piece is one nn.LSTM call
that starts from the carried state with the resetting envs' rows zeroed. A chunk with no reset
after its first step is a single call (the fast path: acting, and most learning chunks).

Finding the cuts reads `first` on the host: on CUDA one synchronisation per call of T > 1 steps
(a learning or evaluation block), the price of nn.LSTM's fused pass, which cannot reset part of
the batch mid-sequence. A call of one step (acting) has no cut to find and reads nothing back.

Letters: T steps, B envs, L layers, I input width, H hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from agents.cores.checks import check_at_least
from agents.cores.stepwise import StepwiseRun


@dataclass
class LSTMConfig:
    hidden_size: int = 64
    n_layers: int = 1

    def __post_init__(self):
        check_at_least("hidden_size", self.hidden_size, 1)
        check_at_least("n_layers", self.n_layers, 1)


class LSTMState(NamedTuple):
    h: torch.Tensor  # (B, L, H) hidden state of each layer after the last step
    c: torch.Tensor  # (B, L, H) cell state


class LSTMCore(nn.Module):
    def __init__(self, input_dim: int, config: LSTMConfig):
        super().__init__()
        self.config = config
        self.output_dim = config.hidden_size
        self.lstm = nn.LSTM(input_dim, config.hidden_size, config.n_layers)  # time-major

    def initial_state(self, batch_size: int, device: torch.device | str) -> LSTMState:
        dtype = self.lstm.weight_ih_l0.dtype  # the weights' (a core cast to bfloat16 carries bfloat16)
        zeros = torch.zeros(batch_size, self.config.n_layers, self.config.hidden_size, dtype=dtype, device=device)
        return LSTMState(zeros, zeros.clone())

    def forward(self, x: torch.Tensor, state: LSTMState, first: torch.Tensor) -> tuple[torch.Tensor, LSTMState]:
        """x: (T, B, I), first: (T, B) bool -> y: (T, B, H), the state after step T - 1.

        Where first[t, b], env b's h and c are zeroed before step t.
        """
        steps = x.shape[0]
        cuts = (first[1:].any(dim=1).nonzero().flatten() + 1).tolist() if steps > 1 else []  # steps where some env resets
        h, c = state.h.transpose(0, 1), state.c.transpose(0, 1)  # (L, B, H) as nn.LSTM wants
        outputs = []
        for start, end in zip([0, *cuts], [*cuts, steps]):
            reset = first[start][None, :, None]  # (1, B, 1)
            carried = (torch.where(reset, 0.0, h).contiguous(), torch.where(reset, 0.0, c).contiguous())
            run = self._one_step if end - start == 1 else self.lstm
            y, (h, c) = run(x[start:end], carried)  # y: (end - start, B, H)
            outputs.append(y)
        new_state = LSTMState(h.detach().transpose(0, 1).contiguous(), c.detach().transpose(0, 1).contiguous())
        return torch.cat(outputs), new_state

    def open(self, state: LSTMState, steps: int) -> "LSTMRun":
        """A call fed one step at a time (inputs that depend on earlier outputs, as when acting
        with the graph kept): run.step(x_t, first_t) -> y_t, run.outputs() -> all steps' y
        (T, B, H) and run.finish() -> state."""
        return LSTMRun(self, state, steps)

    def _one_step(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        """nn.LSTM's equations for a single step, layer by layer with torch.lstm_cell: on CPU
        nn.LSTM spends about 2 ms a call setting up oneDNN, several times the step itself at
        small batches, which is what acting (T = 1) runs. x: (1, B, I); h, c: (L, B, H)."""
        h, c = state
        out, hs, cs = x[0], [], []
        for k in range(self.config.n_layers):
            weights = [getattr(self.lstm, f"{name}_l{k}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            out, ck = torch.lstm_cell(out, (h[k], c[k]), *weights)
            hs.append(out)
            cs.append(ck)
        return out[None], (torch.stack(hs), torch.stack(cs))


class LSTMRun(StepwiseRun):
    """One call over at most `steps` steps, advanced a step at a time; equals forward(). Its
    methods keep the order stepwise.py says."""

    def __init__(self, core: LSTMCore, state: LSTMState, steps: int):
        self.core, self.steps, self.t = core, steps, 0
        self.h, self.c = state.h.transpose(0, 1), state.c.transpose(0, 1)  # (L, B, H)
        self.ys: list[torch.Tensor] = []

    def step(self, x: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """x: (B, I), first: (B,) bool -> y: (B, H)."""
        self.check_step()
        reset = first[None, :, None]  # (1, B, 1)
        carried = (torch.where(reset, 0.0, self.h), torch.where(reset, 0.0, self.c))
        y, (self.h, self.c) = self.core._one_step(x[None], carried)
        self.t += 1
        self.ys.append(y[0])
        return y[0]

    def outputs(self) -> torch.Tensor:
        """(T, B, H) the outputs of the steps taken, with their graph."""
        self.check_outputs()
        return torch.stack(self.ys)

    def finish(self) -> LSTMState:
        """The state after the steps taken (detached, like forward's)."""
        self.check_finish()
        return LSTMState(self.h.detach().transpose(0, 1).contiguous(), self.c.detach().transpose(0, 1).contiguous())
