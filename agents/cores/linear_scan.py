"""The recurrence of the linear memories (ffm.py, lru.py, mamba.py), over a call's steps at once:

    h_t = a_t * h_{t-1} + v_t,    and h_t = v_t where first[t] (an episode starts: nothing before it counts)

a_t is a decay per state unit (|a_t| < 1), v_t the step's input to the state; both real or both
complex. FFM and LRU give one complex decay per unit, the same at every step (a (N,) tensor);
Mamba a real decay per step, env and unit that its input chose (a (T, B, N) tensor: the selective
scan). Because the update is linear, the T steps of a learning call need no loop over steps:
the pairs (A, h) of "decay so far, state so far" combine associatively,

    (A1, h1) then (A2, h2)  =  (A2 A1, A2 h1 + h2),       (A the product of the decays a pair spans)

so Hillis and Steele's doubling scan gets every step's state in log2(T) rounds of elementwise
work over the whole call, multiplying decays only (no division by a power of a, which overflows
for fast-decaying units): exact to rounding whatever |a_t|. An episode start is a step whose decay
is 0, so nothing crosses it. Acting (T = 1) is one multiply-add.

Which way runs depends on the device. On a CPU the steps run one after another (`_stepwise`, in
_SelectiveScan: no graph, the backward a second scan from the last step back): fewer passes over
memory than the rounds, and faster at every size measured (STEPWISE_DEVICES). Elsewhere (a GPU)
the doubling rounds run over chunks of `chunk` steps, one chunk after another, the state carried
between them: the chunk bounds the memory the rounds keep for the backward pass (log2(chunk)
copies of the chunk's states instead of log2(T) of the call's). 16 is the chunk
benchmarks/linear_scan.py measured fastest over T = 32, 256 and 1,024 on the 2-core AMD EPYC
(docs/speed.md, "Linear recurrent cores"); not measured on a GPU.

Letters: T steps, B envs, N state units.
"""

from __future__ import annotations

import torch

CHUNK = 16  # steps a doubling scan covers at once (see the module docstring)
# Where the scan runs one step after another (`_stepwise`): on a CPU a step's multiply-add is two
# passes over its memory, against the doubling rounds' ten or so a round, and a call of Python a
# step costs less than the rounds' extra passes even at a step of 16 units
# (benchmarks/selective_scan.py: 1.4x to 3.0x faster, forward and backward, at every width and
# length of assets/speed/selective_scan_epyc.json; 1.1x to 2.4x at one env). On a GPU a step a kernel launch would cost more than the rounds.
STEPWISE_DEVICES = ("cpu",)


def recurrence_dtype(weights: torch.dtype) -> torch.dtype:
    """The real dtype the recurrence runs in for weights of dtype `weights`: float64 for float64,
    else float32 (a bfloat16 core's too: there is no complex bfloat16 on the CPU)."""
    return torch.float64 if weights == torch.float64 else torch.float32


def linear_scan(decay: torch.Tensor, inputs: torch.Tensor, first: torch.Tensor, state: torch.Tensor,
                chunk: int = CHUNK) -> torch.Tensor:
    """Every step's state: decay (N,) (one per unit, at every step) or (T, B, N) (one per step),
    inputs (T, B, N), first (T, B) bool, state (B, N) (h before step 0) -> (T, B, N); decay,
    inputs and state all complex or all real."""
    if decay.dim() not in (1, 3) or decay.shape[-1] != inputs.shape[-1] or (decay.dim() == 3 and decay.shape != inputs.shape):
        raise ValueError(f"decay must have shape (N,) or the inputs' (T, B, N) = {tuple(inputs.shape)}; got {tuple(decay.shape)}")
    if decay.dim() == 3 or stepwise(inputs):  # one decay per unit: the same at every step, a view
        return _SelectiveScan.apply(decay.expand(inputs.shape), inputs, first, state, chunk)
    return _chunks(decay, inputs, first, state, chunk)


def _chunks(decay: torch.Tensor, inputs: torch.Tensor, first: torch.Tensor, state: torch.Tensor, chunk: int) -> torch.Tensor:
    """linear_scan, chunk after chunk."""
    decays = decay.split(chunk) if decay.dim() == 3 else [decay] * len(range(0, inputs.shape[0], chunk))
    parts = []
    for decay_part, inputs_part, first_part in zip(decays, inputs.split(chunk), first.split(chunk)):  # split, not slices: the
        states = _scan(decay_part, inputs_part, first_part, state)  # backward of a slice fills a zero gradient the size of the call
        parts.append(states)
        state = states[-1]
    return parts[0] if len(parts) == 1 else torch.cat(parts)


class _SelectiveScan(torch.autograd.Function):
    """linear_scan with per-step decays (or one per unit, expanded), its backward a second scan
    run backwards in time.

    Autograd through the doubling rounds keeps every round's products and, for each slice of
    them, fills a zero gradient the size of the chunk: with Mamba's E N units per env, three
    quarters of a learning call. The recurrence's adjoint is itself a linear recurrence, from the
    last step back (conjugates for complex decays, torch's convention; a no-op for real ones):

        g_t = dL/dh_t + conj(a'_{t+1}) g_{t+1},    a'_t = a_t, or 0 where first[t]
        dL/dv_t = g_t,    dL/da_t = g_t conj(h_{t-1}) (0 where first[t]),    dL/dh_{-1} = conj(a'_0) g_0

    so the forward runs without a graph and keeps only its states (its output), and the
    backward is one scan of the same kind."""

    @staticmethod
    def forward(ctx, decay, inputs, first, state, chunk):
        ctx.stepwise = stepwise(inputs)  # the backward runs the same way
        if ctx.stepwise:
            states = _stepwise(torch.where(first[..., None], torch.zeros_like(decay), decay), inputs, state)
        else:
            states = _chunks(decay, inputs, first, state, chunk)
        ctx.save_for_backward(decay, first, state, states)
        ctx.chunk = chunk
        return states

    @staticmethod
    def backward(ctx, grad):
        decay, first, state, states = ctx.saved_tensors
        into = torch.where(first[..., None], torch.zeros_like(decay), decay).conj()  # (T, B, N): conj(a'_t)
        if ctx.stepwise:
            g = _stepwise(into, grad, None)
        else:
            back = torch.cat([into[1:], torch.zeros_like(into[:1])]).flip(0)  # step s of the reversed call: conj(a'_{T - s})
            g = _chunks(back, grad.flip(0), torch.zeros_like(first), torch.zeros_like(state), ctx.chunk).flip(0)  # (T, B, N)
        grad_decay = torch.empty_like(g)  # g_t conj(h_{t-1}), 0 at a start
        torch.mul(g[0], state.conj(), out=grad_decay[0])
        torch.mul(g[1:], states[:-1].conj(), out=grad_decay[1:])
        return grad_decay.masked_fill_(first[..., None], 0), g, None, into[0] * g[0], None


def stepwise(inputs: torch.Tensor) -> bool:
    """Whether the scan over `inputs` runs one step after another: on STEPWISE_DEVICES."""
    return inputs.device.type in STEPWISE_DEVICES


def _stepwise(into: torch.Tensor, inputs: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
    """h_t = into_t h_{t-1} + inputs_t from step 0 on, h_{-1} = `state`; or, for `state` None,
    the adjoint's g_t = into_{t+1} g_{t+1} + inputs_t from the last step back, g_{T-1} = inputs_{T-1}.
    into (T, B, N) holds 0 at episode starts. One multiply-add a step, written in place: no graph
    (_SelectiveScan's forward and backward run without one)."""
    states = torch.empty_like(inputs)
    if state is None:
        h = states[-1].copy_(inputs[-1])
        for t in reversed(range(inputs.shape[0] - 1)):
            h = torch.addcmul(inputs[t], into[t + 1], h, out=states[t])
    else:
        h = state
        for t in range(inputs.shape[0]):
            h = torch.addcmul(inputs[t], into[t], h, out=states[t])
    return states


def _scan(decay: torch.Tensor, inputs: torch.Tensor, first: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """linear_scan over one chunk, by doubling."""
    steps = inputs.shape[0]
    into = torch.where(first[..., None], torch.zeros_like(decay), decay)  # (T, B, N): the decay into each step, 0 at a start
    total, h = into, inputs  # after the round of span d: step t's pair covers steps t - 2d + 1 .. t
    span = 1
    while span < steps:
        h = torch.cat([h[:span], h[span:] + total[span:] * h[:-span]])
        total = torch.cat([total[:span], total[span:] * total[:-span]])
        span *= 2
    return h + total * state  # the state before the chunk enters each step through its decays since
