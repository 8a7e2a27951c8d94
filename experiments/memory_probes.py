"""What a corridor agent's memory path does, measured on corridors walked straight to the doors.

The agent's policy is fed the walk of experiments/cue_memory.py (64 fresh corridors, forward at
every step, so episodes differ only in the cue and the door order) and we read:

- `cue_separation`: cue_memory's measure at the doors, on the core's output;
- `output_separation`: the same at every step of the walk, start cell to doors;
- `gradient_to_cue`: how much of a signal at the doors reaches the cue's step. The gradient of
  the log-probability of the correct door at the doors with respect to the core's input at the
  start cell, over that with respect to the core's input at the doors (norms, mean over
  episodes); `value_gradient_to_cue` the same for the critic's value. 1e-7 means the learning
  signal of the door choice never gets back to the cue;

and for the Feedback core (m_t = sum_l softmax(w)_l x_t^l, feedback/reference.py):

- `layer_weights`: softmax(w), l = 0 the input embedding;
- `memory_gap`: per step, |mean m_t (blue cue) - mean m_t (green cue)|, the cue-dependent part
  of the memory, averaged over door orders; `memory_norm`: mean |m_t|;
- `retention`: the geometric mean over the walk of memory_gap_t / memory_gap_{t-1}, how much
  of the cue's part of m_{t-1} survives into m_t (at span 1 the cue can only pass this way:
  after the start cell the inputs carry none of it);
- `norms`: the Frobenius norms of the embedding, the key and value halves of the memory's
  projection, each layer's attention output projection, and the mean |gain| of the LayerNorm
  the memory is read through (its denominator is the memory's spread: a memory whose
  cue-independent part grows reads its cue part smaller).

Used by memory_trace.py during training, at a few hundred thousand frames' intervals.
"""

from __future__ import annotations

import numpy as np
import torch

from agents.cores.feedback.reference import FeedbackReference
from agents.model.policy import Policy
from experiments.cue_memory import CorridorWalk, door_outputs, separation, walk_inputs


def probe(policy: Policy, walk: CorridorWalk) -> dict:
    """Every number of the module docstring for `policy` on `walk` (policy left in its mode)."""
    training = policy.training
    policy.eval()
    try:
        numbers = {"cue_separation": separation(door_outputs(policy, walk), walk), **gradients_to_cue(policy, walk)}
        outputs, memories = walk_steps(policy, walk)
        numbers["output_separation"] = [separation(y, walk) for y in outputs]
        if isinstance(policy.core, FeedbackReference):
            numbers.update(feedback_numbers(policy.core, memories, walk))
        return numbers
    finally:
        policy.train(training)


@torch.no_grad()
def walk_steps(policy: Policy, walk: CorridorWalk) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The walk one step at a time: the core's output at each step, (N, D) each, and for the
    Feedback core the memory vector m_t it stored (raw), (N, D) each (else an empty list)."""
    x, first = walk_inputs(policy, walk)
    state = policy.initial_state(x.shape[1], x.device)
    outputs, memories = [], []
    for t in range(x.shape[0]):
        y, state = policy.core(x[t : t + 1], state, first[t : t + 1])
        outputs.append(y[0].cpu().numpy())
        if isinstance(policy.core, FeedbackReference):
            memories.append(state.memory[:, state.end - 1].float().cpu().numpy())  # slots [end - S, end): the newest last
    return outputs, memories


def gradients_to_cue(policy: Policy, walk: CorridorWalk) -> dict[str, float]:
    """|d signal at the doors / d core input at the start| over |... / d core input at the doors|,
    mean over episodes, for the log-probability of the correct door and for the value."""
    x, first = walk_inputs(policy, walk)
    x = x.detach().requires_grad_(True)  # (T, N, input_dim)
    with torch.enable_grad():
        y, _ = policy.core(x, policy.initial_state(x.shape[1], x.device), first)
        logprob = torch.log_softmax(policy.actor(y[-1]).float(), dim=-1)
        correct = torch.as_tensor(walk.correct, device=x.device)
        signals = {"gradient_to_cue": logprob.gather(1, correct[:, None]).sum(), "value_gradient_to_cue": policy.critic(y[-1]).sum()}
        ratios = {}
        for name, signal in signals.items():
            (grad,) = torch.autograd.grad(signal, x, retain_graph=True)
            norms = grad.float().norm(dim=-1).mean(dim=1)  # (T,) mean over episodes
            ratios[name] = float(norms[0] / norms[-1])
    return ratios


def feedback_numbers(core: FeedbackReference, memories: list[np.ndarray], walk: CorridorWalk) -> dict:
    """softmax(w), the memory's cue gap and norm per step, its retention, the weights' norms."""
    gap = [float(np.mean([np.linalg.norm(m[(walk.cue == 1) & (walk.upper == u)].mean(0) - m[(walk.cue == 2) & (walk.upper == u)].mean(0))
                          for u in np.unique(walk.upper)])) for m in memories]
    retention = (gap[-1] / gap[0]) ** (1 / (len(gap) - 1)) if gap[0] > 0 else float("nan")
    d = core.config.d_model
    with torch.no_grad():
        norms = {"embed": core.embed.weight.norm(), "keys": core.kv[0].weight[:d].norm(), "values": core.kv[0].weight[d:].norm(),
                 **{f"out{layer + 1}": block.out.weight.norm() for layer, block in enumerate(core.blocks)}}
        gain = getattr(core.memory_norm[0], "weight", None)
        if gain is not None:
            norms["memory_norm_gain"] = gain.abs().mean()
        weights = core.layer_weights.tolist()
    return {
        "layer_weights": weights, "memory_gap": gap, "memory_norm": [float(np.linalg.norm(m, axis=1).mean()) for m in memories],
        "retention": float(retention), "norms": {name: float(value) for name, value in norms.items()},
    }
