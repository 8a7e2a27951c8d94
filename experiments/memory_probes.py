"""What an agent's memory path does, measured on episodes walked to the step that needs the cue.

The agent's policy is fed a walk of experiments/cue_memory.py: 64 fresh corridors walked forward
to the step their doors come into view, or 64 episodes of the memory length task answered 0 up
to the step that asks for the bit; episodes differ only in the cue and the door order (the
query). We read:

- `cue_separation`: cue_memory's measure at the walk's last step (the doors, the query), on the
  core's output;
- `output_separation`: the same at every step of the walk, first step to last;
- `gradient_to_cue`: how much of a signal at the last step reaches the cue's step. The gradient
  of the log-probability of the correct action at the last step with respect to the core's
  input at the first step, over that with respect to the core's input at the last step (norms,
  mean over episodes); `value_gradient_to_cue` the same for the critic's value. 1e-7 means the
  learning signal of the decision never gets back to the cue (0: no path reaches it, as a
  Transformer's attention past its reach);

and for the Feedback core (m_t = sum_l softmax(w)_l x_t^l, feedback/reference.py):

- `layer_weights`: softmax(w), l = 0 the input embedding;
- `memory_gap`: per step, |mean m_t (cue 1) - mean m_t (cue 2)|, the cue-dependent part
  of the memory, averaged over door orders (queries); `memory_norm`: mean |m_t|;
- `retention`: the geometric mean over the walk of memory_gap_t / memory_gap_{t-1}, how much
  of the cue's part of m_{t-1} survives into m_t (at span 1 the cue can only pass this way:
  after the first step the inputs carry none of it); `kept_retention` the same of the kept
  slot k_t where the core keeps one (reference.py's keep_slot);
- `norms`: the Frobenius norms of the embedding, the key and value halves of the memory's
  projection, each layer's attention output projection, and the mean |gain| of the LayerNorm
  the memory is read through (its denominator is the memory's spread: a memory whose
  cue-independent part grows reads its cue part smaller).

Used by memory_trace.py during training, at a few hundred thousand frames' intervals, and by
recall_cliff.py on the memory length runs' final policies.
"""

from __future__ import annotations

import numpy as np
import torch

from agents.cores.feedback.reference import FeedbackReference
from agents.model.policy import Policy
from experiments.cue_memory import CueWalk, cue_gap, door_outputs, separation, walk_inputs


def probe(policy: Policy, walk: CueWalk) -> dict:
    """Every number of the module docstring for `policy` on `walk` (policy left in its mode)."""
    training = policy.training
    policy.eval()
    try:
        numbers = {"cue_separation": separation(door_outputs(policy, walk), walk), **gradients_to_cue(policy, walk)}
        outputs, memories, kept = walk_steps(policy, walk)
        numbers["output_separation"] = [separation(y, walk) for y in outputs]
        if isinstance(policy.core, FeedbackReference):
            numbers.update(feedback_numbers(policy.core, memories, walk))
        if kept:
            numbers["kept_retention"] = retention([cue_gap(k, walk) for k in kept])
        return numbers
    finally:
        policy.train(training)


@torch.no_grad()
def walk_steps(policy: Policy, walk: CueWalk) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """The walk one step at a time: the core's output at each step, (N, D) each, and for the
    Feedback core the memory vector m_t it stored (raw), (N, D) each, and its kept slot k_t where
    it keeps one (keep_slot), (N, D) each (else empty lists)."""
    x, first = walk_inputs(policy, walk)
    state = policy.initial_state(x.shape[1], x.device)
    outputs, memories, kept = [], [], []
    for t in range(x.shape[0]):
        y, state = policy.core(x[t : t + 1], state, first[t : t + 1])
        outputs.append(y[0].cpu().numpy())
        if isinstance(policy.core, FeedbackReference):
            memories.append(policy.core.written_memory(state).float().cpu().numpy())
            if policy.core.config.keep_slot:
                kept.append(state.kept.float().cpu().numpy())
    return outputs, memories, kept


def gradients_to_cue(policy: Policy, walk: CueWalk) -> dict[str, float]:
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


def retention(gap: list[float]) -> float:
    """The geometric mean of gap_t / gap_{t-1} over the walk (nan where the first gap is 0)."""
    return float((gap[-1] / gap[0]) ** (1 / (len(gap) - 1))) if gap[0] > 0 else float("nan")


def feedback_numbers(core: FeedbackReference, memories: list[np.ndarray], walk: CueWalk) -> dict:
    """softmax(w), the memory's cue gap and norm per step, its retention, the weights' norms."""
    gap = [cue_gap(m, walk) for m in memories]
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
        "retention": retention(gap), "norms": {name: float(value) for name, value in norms.items()},
    }
