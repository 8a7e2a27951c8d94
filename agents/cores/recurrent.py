"""What the LSTM and GRU cores share: a torch RNN (nn.LSTM, nn.GRU) with its state zeroed where
an episode begins. Each subclass says only what differs: its module, its state and its cell.

A torch RNN runs a whole sequence in one call but cannot reset part of the batch mid-sequence.
So a chunk is cut at the steps where some env begins an episode, and each piece is one fused call
that starts from the carried state with the resetting envs' rows zeroed. A chunk with no reset
after its first step is a single call (the fast path: acting, and most learning chunks) unless it
is longer than FUSED_STEPS, which is cut every FUSED_STEPS steps as well. A piece of one step runs
the module's equations with its cell function instead (`_one_step`), and so does a call fed a
step at a time (`open`, for acting with the graph kept).

Finding the cuts reads `first` on the host: on CUDA one synchronisation per call of T > 1 steps
(a learning or evaluation block), the price of the fused pass, which cannot reset part of the
batch mid-sequence. A call of one step (acting) has no cut to find and reads nothing back.

A subclass gives:
- `rnn`: its torch module (time-major), whose weights are named weight_ih_l{k}, weight_hh_l{k},
  bias_ih_l{k}, bias_hh_l{k};
- `State`: a NamedTuple of (B, L, H) tensors (LSTM: h, c; GRU: h);
- `fused(x, carried)`: the module over a piece of steps, the state as a tuple of (L, B, H);
- `cell(x, carried, weights)`: one layer's step, its new state as a tuple whose first is h;
- `KEEP_GATE`, `WRITE_GATE`: where in a layer's biases (H rows a gate) the gate that keeps the
  memory and the one that writes it lie, for `gate_init` (`init_gate_biases`).

Letters: T steps, B envs, L layers, I input width, H hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from agents.cores.checks import check_at_least, check_choice
from agents.cores.stepwise import StepwiseRun

Carried = tuple[torch.Tensor, ...]  # the state time-major, (L, B, H) each, as torch's RNNs take it
WEIGHTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")  # one layer's, in the order the cells take them
GATE_INITS = ("pytorch", "forget_bias", "chrono")  # how the gate biases start (init_gate_biases)
# The most steps of one fused call. A learning call of a long gradient window (--bptt 1,024) in one
# oneDNN pass keeps every step's gates for its backward (K B 4 H floats: 134 MB at the CPU preset)
# and cost, per step, 1.22x a 32-step call's in `python benchmarks/long_window.py`, 1.9x with the
# LSTM alone in the process (`--cores lstm`); in pieces of 64 steps 0.96x and 1.13x (pieces of 96
# or 128: 1.55x alone). docs/speed.md, "Long windows".
FUSED_STEPS = 64


@dataclass
class RecurrentConfig:
    hidden_size: int = 64
    n_layers: int = 1
    gate_init: str = "pytorch"  # "forget_bias" or "chrono": gate biases for long memory (init_gate_biases)
    t_max: int = 100  # chrono's T_max, read by chrono alone: about twice the longest dependency, in steps

    def __post_init__(self):
        check_at_least("hidden_size", self.hidden_size, 1)
        check_at_least("n_layers", self.n_layers, 1)
        check_choice("gate_init", self.gate_init, GATE_INITS)
        check_at_least("t_max", self.t_max, 2)  # u ~ Uniform(1, T_max - 1) needs T_max - 1 >= 1


class RecurrentCore(nn.Module):
    sequential = True  # its steps run one after another: packing episodes side by side shortens a learning call
    State: type[NamedTuple]
    KEEP_GATE: int  # the gate whose value near 1 keeps the memory (LSTM: forget f; GRU: update z)
    WRITE_GATE: int | None  # the gate that writes it (LSTM: input i; GRU: none, 1 - z writes)

    def __init__(self, config: RecurrentConfig):
        super().__init__()
        self.config = config
        self.output_dim = config.hidden_size

    @property
    def rnn(self) -> nn.RNNBase:
        raise NotImplementedError

    def fused(self, x: torch.Tensor, carried: Carried) -> tuple[torch.Tensor, Carried]:
        """x: (T', B, I) -> y: (T', B, H) and the state after the last step."""
        raise NotImplementedError

    def cell(self, x: torch.Tensor, carried: Carried, weights: list[torch.Tensor]) -> Carried:
        """One layer's step: x (B, I or H), carried (B, H) each -> that layer's new state, h first."""
        raise NotImplementedError

    def init_gate_biases(self) -> None:
        """Start every layer's gate biases as `config.gate_init` says; the subclass calls it once
        its module is built, so a checkpoint's load_state_dict replaces it as any weight.

        - "pytorch": torch's default, left alone (every bias ~ U(-1/sqrt(H), 1/sqrt(H)), so a
          forget gate keeps about half the cell state a step);
        - "forget_bias": the keep gate's bias 1 (Gers et al. 2000; Jozefowicz et al. 2015);
        - "chrono" (Tallec & Ollivier 2018): the keep gate's bias log(u), one u ~ U(1, T_max - 1)
          a hidden unit, drawn from torch's global generator (torch.manual_seed fixes it as every
          other weight), and the write gate's the opposite, -log(u), so a unit starts keeping its
          memory for about 1 + u steps.

        A gate adds bias_ih + bias_hh: the target goes into bias_ih's rows of the gate and
        bias_hh's are zeroed, so the sum is the target exactly. The other gates keep torch's
        default."""
        c = self.config
        if c.gate_init == "pytorch":
            return
        with torch.no_grad():
            for k in range(c.n_layers):
                b_ih, b_hh = getattr(self.rnn, f"bias_ih_l{k}"), getattr(self.rnn, f"bias_hh_l{k}")
                if c.gate_init == "forget_bias":
                    keep = b_ih.new_ones(c.hidden_size)
                else:
                    keep = b_ih.new_empty(c.hidden_size).uniform_(1, c.t_max - 1).log()
                set_gate_bias(b_ih, b_hh, self.KEEP_GATE, keep)
                if c.gate_init == "chrono" and self.WRITE_GATE is not None:
                    set_gate_bias(b_ih, b_hh, self.WRITE_GATE, -keep)

    def initial_state(self, batch_size: int, device: torch.device | str) -> NamedTuple:
        dtype = self.rnn.weight_ih_l0.dtype  # the weights' (a core cast to bfloat16 carries bfloat16)
        shape = (batch_size, self.config.n_layers, self.config.hidden_size)
        return self.State(*(torch.zeros(shape, dtype=dtype, device=device) for _ in self.State._fields))

    def forward(self, x: torch.Tensor, state: NamedTuple, first: torch.Tensor) -> tuple[torch.Tensor, NamedTuple]:
        """x: (T, B, I), first: (T, B) bool -> y: (T, B, H), the state after step T - 1.

        Where first[t, b], env b's state is zeroed before step t.
        """
        steps = x.shape[0]
        cuts = (first[1:].any(dim=1).nonzero().flatten() + 1).tolist() if steps > 1 else []  # steps where some env resets
        carried, outputs = time_major(state), []
        for start, end in pieces(cuts, steps):
            run = self._one_step if end - start == 1 else self.fused
            y, carried = run(x[start:end], reset(carried, first[start]))  # y: (end - start, B, H)
            outputs.append(y)
        return torch.cat(outputs), self.batch_major(carried)

    def open(self, state: NamedTuple, steps: int) -> "RecurrentRun":
        """A call fed one step at a time (inputs that depend on earlier outputs, as when acting
        with the graph kept): run.step(x_t, first_t) -> y_t, run.outputs() -> all steps' y
        (T, B, H) and run.finish() -> state."""
        return RecurrentRun(self, state, steps)

    def batch_major(self, carried: Carried) -> NamedTuple:
        """The state as the core hands it on: batch-major and detached."""
        return self.State(*(t.detach().transpose(0, 1).contiguous() for t in carried))

    def _one_step(self, x: torch.Tensor, carried: Carried) -> tuple[torch.Tensor, Carried]:
        """The module's equations for a single step, layer by layer with its cell: on the CPU
        nn.LSTM's per-call set-up of oneDNN costs more than the step itself at small batches,
        which is what acting (T = 1) runs (docs/speed.md, Memory cores). x: (1, B, I); carried:
        (L, B, H) each."""
        out, layers = x[0], []
        for k in range(self.config.n_layers):
            weights = [getattr(self.rnn, f"{name}_l{k}") for name in WEIGHTS]
            layer = self.cell(out, tuple(t[k] for t in carried), weights)
            out = layer[0]
            layers.append(layer)
        return out[None], tuple(torch.stack(t) for t in zip(*layers))


def set_gate_bias(b_ih: torch.Tensor, b_hh: torch.Tensor, gate: int, value: torch.Tensor) -> None:
    """Make gate `gate`'s bias (b_ih + b_hh, H rows a gate) `value` (H,): all of it in b_ih."""
    rows = slice(gate * value.numel(), (gate + 1) * value.numel())
    b_ih[rows] = value
    b_hh[rows] = 0.0


def pieces(cuts: list[int], steps: int) -> list[tuple[int, int]]:
    """[start, end) of each fused call over `steps` steps: cut at `cuts` (where some env resets)
    and every FUSED_STEPS steps after a cut."""
    bounds = []
    for start, end in zip([0, *cuts], [*cuts, steps]):
        bounds += [(s, min(s + FUSED_STEPS, end)) for s in range(start, end, FUSED_STEPS)]
    return bounds


def time_major(state: NamedTuple) -> Carried:
    """(B, L, H) each -> (L, B, H) each, as torch's RNNs take their state."""
    return tuple(t.transpose(0, 1) for t in state)


def reset(carried: Carried, first: torch.Tensor) -> Carried:
    """The state with the rows of the envs where `first` (B,) zeroed, contiguous as the fused kernels want."""
    where = first[None, :, None]  # (1, B, 1)
    return tuple(torch.where(where, 0.0, t).contiguous() for t in carried)


class RecurrentRun(StepwiseRun):
    """One call over at most `steps` steps, advanced a step at a time; equals forward(). Its
    methods keep the order stepwise.py says."""

    def __init__(self, core: RecurrentCore, state: NamedTuple, steps: int):
        self.core, self.steps, self.t = core, steps, 0
        self.carried = time_major(state)
        self.ys: list[torch.Tensor] = []

    def step(self, x: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """x: (B, I), first: (B,) bool -> y: (B, H)."""
        self.check_step()
        y, self.carried = self.core._one_step(x[None], reset(self.carried, first))
        self.t += 1
        self.ys.append(y[0])
        return y[0]

    def outputs(self) -> torch.Tensor:
        """(T, B, H) the outputs of the steps taken, with their graph."""
        self.check_outputs()
        return torch.stack(self.ys)

    def finish(self) -> NamedTuple:
        """The state after the steps taken (detached, like forward's)."""
        self.check_finish()
        return self.core.batch_major(self.carried)
