"""Episodes packed side by side: a learning call over fewer sequential steps, with the same result.

A recomputing learner (PPO's minibatches, A2C's recompute learner) runs the core over L steps
of K envs, one step after another for a recurrent core. Where episodes end inside those steps,
an env's column is several independent pieces: the core drops its memory at every `first`, so
nothing before an episode start reaches what comes after it. The same call can then run the
pieces as columns of their own: N segments, each an episode's part of one env's column, side by
side in a call of L' = the longest segment's steps. A segment starts from its env's state before
the call (the column's first segment) or at an episode start (where the core resets that state
anyway), so every real step's output is the one the unpacked call gives, up to the rounding of a
wider batch; the padding after a shorter segment's end repeats its last step and its outputs are
dropped, so no loss and no gradient reaches them (and it begins no episode).

What it buys and costs: a recurrent core's call pays a fixed cost per sequential step and
arithmetic per column and step, and the padding is arithmetic spent on nothing. Modelled as
steps x (columns + FIXED_WIDTH), the fixed cost counted in columns, a call is packed only where
that model says it is cheaper. FIXED_WIDTH = 3 is fitted to the Feedback core's PPO update at
CleanRL's MemoryS9 recipe on the CPU (benchmarks/ppo_feedback.py, with episodes of up to 96 steps
and of up to 24); where the per-step cost is larger (a GPU's kernel launches, small models)
packing would pay more often than the rule lets it. Where a packed call would be about as long
and twice as wide (every env starting an episode at the chunk's last step), it is not packed:
such a call measured slower than the unpacked one (the LSTM's update at the paper preset on the
easy maze, 128 envs, 101 steps packed as 256 columns of 100).

The plan needs the episode starts on the host (the rollout keeps them there, `StepInputs.starts`):
it is data-dependent and read nowhere from the device; its indices cross to the device in one
asynchronous copy. Only cores whose steps run one after another pack (`core.sequential`: the
Feedback core, the LSTM, the GRU, the echo-state reservoir); for the Transformer and the MLP,
whose steps run side by side, packing would only add padding. Dropout, where a recomputing learner
allows it (nowhere in training today), would draw other masks for the other shape.

Letters: L steps and K envs of the unpacked call, L' steps and N segments of the packed one.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from agents.cores.state import select_envs
from agents.model.step_inputs import StepInputs
from agents.runtime.staging import Staging

FIXED_WIDTH = 3  # a step's fixed cost in columns of arithmetic, for deciding whether to pack


class Packing(NamedTuple):
    """Where each step goes: indices into the flattened (step-major) calls."""

    env: torch.Tensor  # (N,) long: the column each segment comes from, whose start state it takes
    take: torch.Tensor  # (L' N,) long: each packed step's position in the (L K) call; padding repeats a segment's last step
    put: torch.Tensor  # (L K,) long: each step's position in the (L' N) packed call
    real: torch.Tensor  # (L', N) bool: a segment's own steps, False on its padding
    steps: int  # L'


def plan(starts: np.ndarray, device: torch.device, fixed_width: float | None = None) -> Packing | None:
    """The packing of a call whose episode starts are `starts` (L, K) bool, its indices on
    `device`; None where it would not pay with a step's fixed cost `fixed_width` columns (default
    FIXED_WIDTH; see the module docstring)."""
    if starts.ndim != 2:
        raise ValueError(f"episode starts are (steps, envs), got shape {starts.shape}")
    length, envs = starts.shape
    begins = starts.copy()
    begins[0] = True  # every column's first step begins a segment
    column, start = np.nonzero(begins.T)  # (N,) each, by column then step: segment n's env and first step
    end = np.append(start[1:], length)
    end[np.append(column[1:] != column[:-1], True)] = length  # a column's last segment runs to the call's end
    steps, count = int((end - start).max()), len(start)
    fixed = FIXED_WIDTH if fixed_width is None else fixed_width
    if steps * (count + fixed) >= length * (envs + fixed):
        return None
    offset = np.minimum(np.arange(steps)[:, None], end - start - 1)  # (L', N): the step within its segment, padding held at the last
    take = (start + offset) * envs + column  # (L', N)
    segment = np.cumsum(begins.T, axis=1).T - 1 + np.searchsorted(column, np.arange(envs))  # (L, K): each step's segment
    put = (np.arange(length)[:, None] - start[segment]) * count + segment  # (L, K)
    real = np.arange(steps)[:, None] < end - start  # (L', N)
    # One copy, asynchronous from pinned memory on a GPU: the host does not wait for its queue there.
    env, take, put, real = Staging(device).to_device([column, take.reshape(-1), put.reshape(-1), real])
    return Packing(env, take, put, real, steps)


def pack(p: Packing, tensor: torch.Tensor) -> torch.Tensor:
    """(L, K, ...) -> (L', N, ...)."""
    return tensor.flatten(0, 1)[p.take].unflatten(0, (p.steps, -1))


def unpack(p: Packing, tensor: torch.Tensor, envs: int) -> torch.Tensor:
    """(L', N, ...) -> (L, K, ...)."""
    return tensor.flatten(0, 1)[p.put].unflatten(0, (-1, envs))


def call_packed(policy, inputs: StepInputs, state: Any, outputs_from: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """policy's (logits, values) over (L, K) inputs from `state`, as policy(...) gives them, for
    the steps from `outputs_from` on, run packed where the inputs' `starts` shorten the call; the
    unpacked call where they do not or `starts` is None. The state after the call is not given: a
    packed call has none that is the columns'."""
    p = None if inputs.starts is None else plan(inputs.starts, inputs.first.device)
    if p is None:
        logits, values, _ = policy(inputs, state, outputs_from)
        return logits, values
    # Padding begins no episode: a reset there would cut the LSTM's fused pass (agents/cores/recurrent.py) at every step.
    packed = StepInputs(pack(p, inputs.obs), pack(p, inputs.prev_action), pack(p, inputs.prev_reward),
                        pack(p, inputs.first) & p.real)  # (L', N, ...)
    logits, values, _ = policy(packed, select_envs(state, p.env))
    envs = inputs.first.shape[1]
    return unpack(p, logits, envs)[outputs_from:], unpack(p, values, envs)[outputs_from:]
