"""What episode starts cost the LSTM core's learning call, and what the other ways of honouring them cost.

    python -m benchmarks.lstm_resets

nn.LSTM runs a sequence in one fused call but cannot zero part of the batch mid-sequence, so
agents/cores/recurrent.py cuts a chunk wherever some env starts an episode and makes one call per
piece. PPO's minibatches on MiniGrid Memory are 2 envs x 256 steps (experiments/ppo_peers.py),
and a trained agent's ~19-step episodes cut them into ~25 pieces. This times one forward and
backward pass of such a minibatch (hidden 256, one thread; the best of --repeats after a warm-up)
at several rates of episode starts, four ways:

  pieces    the core as it is: one nn.LSTM call per piece between cuts (length-1 pieces: one cell step)
  stepwise  the core one step at a time (core.open(): torch.lstm_cell per step and layer, autograd per step)
  padded    every episode piece a row of its own, zero-padded to the longest, one nn.LSTM call
            (the layout sb3-contrib's RecurrentPPO uses); the final state by a no-grad pass over the last pieces
  packed    the same rows as a PackedSequence, one nn.LSTM call, no padding computed

All four give the same outputs (checked here, to float32 tolerance). Ratios within one run are
the result: on CPU a fused call costs ~2 ms of set-up and a stepwise step ~1 ms (its autograd
graph), so which wins depends on the number of pieces and the longest one.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from agents.cores.lstm import LSTMCore, LSTMState
from agents.cores.recurrent import RecurrentConfig

STEPS, ENVS, INPUT, HIDDEN = 256, 2, 64, 256
RATES = [0.0, 1 / 64, 1 / 19, 1 / 8]  # chance that an env starts an episode at a step


def pieces(core: LSTMCore, x: torch.Tensor, state: LSTMState, first: torch.Tensor) -> tuple[torch.Tensor, LSTMState]:
    return core(x, state, first)


def stepwise(core: LSTMCore, x: torch.Tensor, state: LSTMState, first: torch.Tensor) -> tuple[torch.Tensor, LSTMState]:
    run = core.open(state, x.shape[0])
    for t in range(x.shape[0]):
        run.step(x[t], first[t])
    return run.outputs(), run.finish()


def rows(core: LSTMCore, x: torch.Tensor, state: LSTMState, first: torch.Tensor, packed: bool) -> tuple[torch.Tensor, LSTMState]:
    """Each env's episode pieces as rows of one batch (N pieces, the longest L steps), one nn.LSTM call."""
    steps, batch = first.shape
    starts = first.clone()
    starts[0] = True
    begins = starts.t().reshape(-1)  # (B * T,) env-major: a piece begins here
    piece = torch.cumsum(begins.long(), 0) - 1  # (B * T,) the piece of each step
    start = begins.nonzero().flatten()  # (N,) where each piece begins
    lengths = torch.diff(torch.cat([start, start.new_tensor([batch * steps])]))  # (N,)
    offset = torch.arange(batch * steps) - start[piece]  # (B * T,) each step's place in its piece
    longest = int(lengths.max())
    slot = (start[None, :] + torch.arange(longest)[:, None]).clamp(max=batch * steps - 1)  # (L, N)
    x_rows = x.transpose(0, 1).reshape(batch * steps, -1)[slot]  # (L, N, I)
    env = start // steps
    carried = (((start % steps) == 0) & ~first[0][env])[None, :, None]  # pieces that go on from the state
    h = torch.where(carried, state.h.transpose(0, 1)[:, env], 0.0).contiguous()
    c = torch.where(carried, state.c.transpose(0, 1)[:, env], 0.0).contiguous()
    if packed:
        out, (h_n, c_n) = core.lstm(pack_padded_sequence(x_rows, lengths, enforce_sorted=False), (h, c))
        out = pad_packed_sequence(out)[0]
        last = torch.searchsorted(start, (torch.arange(batch) + 1) * steps) - 1  # each env's last piece
        new_state = LSTMState(h_n[:, last].transpose(0, 1), c_n[:, last].transpose(0, 1))
    else:
        out = core.lstm(x_rows, (h, c))[0]  # padding steps come after each piece's end: they change no output kept
        with torch.no_grad():  # the state after the last step: the chunk's tail again, a step at a time
            tail = int((steps - 1 - offset.reshape(batch, steps)[:, -1]).min())
            new_state = stepwise(core, x[tail:], state, first[tail:] | (torch.arange(steps - tail) == 0)[:, None])[1]
    y = out[offset, piece].reshape(batch, steps, -1).transpose(0, 1)  # (T, B, H)
    return y, new_state


WAYS = {"pieces": pieces, "stepwise": stepwise,
        "padded": lambda *a: rows(*a, packed=False), "packed": lambda *a: rows(*a, packed=True)}


def seconds(way, core: LSTMCore, x: torch.Tensor, state: LSTMState, first: torch.Tensor, repeats: int) -> float:
    """Best wall seconds of a forward and backward pass, after a warm-up one."""
    best = float("inf")
    for _ in range(repeats + 1):
        started = time.perf_counter()
        y, _ = way(core, x, state, first)
        y.square().mean().backward()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    core = LSTMCore(INPUT, RecurrentConfig(hidden_size=HIDDEN))
    x = torch.randn(STEPS, ENVS, INPUT, requires_grad=True)
    state = LSTMState(torch.randn(ENVS, 1, HIDDEN), torch.randn(ENVS, 1, HIDDEN))
    print(f"LSTM core, hidden {HIDDEN}, {ENVS} envs x {STEPS} steps, forward + backward, one thread (ms; x: the pieces' time):")
    for rate in RATES:
        first = torch.rand(STEPS, ENVS, generator=torch.Generator().manual_seed(1)) < rate
        reference, reference_state = pieces(core, x, state, first)
        for way in WAYS.values():
            y, new_state = way(core, x, state, first)
            torch.testing.assert_close(y, reference)
            torch.testing.assert_close(new_state.h, reference_state.h)
        cuts = int(first[1:].any(dim=1).sum())
        times = {name: seconds(way, core, x, state, first, args.repeats) for name, way in WAYS.items()}
        print(f"  episode starts {rate:.3f} per step ({cuts} cuts): " + ", ".join(
            f"{name} {1000 * value:.1f} ({value / times['pieces']:.2f}x)" for name, value in times.items()))


if __name__ == "__main__":
    main()
