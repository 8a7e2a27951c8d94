"""The Feedback core over steps whose memory was written while acting: all steps at once.

The Feedback Transformer's steps run one after another because step t reads m_{t-S} .. m_{t-1},
which the steps before it compute (reference.py). Acting computed those vectors already. Read
from there, held fixed, every step's layers depend on known inputs only, and a call of T steps
is one pass over all of them, as a Transformer's is: each layer attends, for every step at once,
to the keys and values of its window of the given memory, projected with the current weights.

This is how CleanRL's ppo_trxl learns a Transformer-XL: each minibatch step reads the memory its
rollout cached, and no gradient reaches that memory. So here the gradient reaches every weight
through the current step's path and through the key and value projections of the window, but
not the computation that wrote the memory: the memory cannot be trained to hold something for
later, only read. With the weights acting had, and no dropout, the outputs are acting's
(tests/cores/test_feedback_cached.py); PPO's `--learner cached_memory` (agents/learners/ppo.py)
recomputes its minibatches so.

Letters: T steps, B envs, S span, D d_model, H heads, E head width.
"""

from __future__ import annotations

import torch

from agents.cores.attention import episode_starts, split_heads
from agents.cores.feedback.reference import FeedbackReference, project

# A call attends over each step's own window of S slots (attention.attend, windowed) when its
# S + T - 1 keys are at least this many windows; else over the full (T, S + T - 1) matrix, most
# of it masked, in one product. Measured (one thread, d_model 256, 4 heads, 2 layers, forward and
# backward, time full / windowed): 0.21 at B 64, T 128, S 64; 0.44 at B 2, T 256, S 64; 0.78 at B 2,
# T 256, S 24 (PPO's minibatch at ppo_trxl's recipe, 24-step episodes); 0.79 at B 64, T 256, S 16
# (17 windows); 1.47 at B 4, T 1,024, S 16 (65) and 1.64 at B 16, T 1,024, S 24 (44).
WINDOWED_FROM = 32


def cached_forward(core: FeedbackReference, x: torch.Tensor, state, first: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
    """x: (T, B, input_dim) inputs, `state` the core state before step 0, first: (T, B) bool,
    memory: (T, B, D) the m_t that steps 0 .. T - 1 wrote while acting -> y: (T, B, D).

    Step t reads the window m_{t-S} .. m_{t-1} of the state's last S slots followed by `memory`,
    from its episode's start on (`first`; the state's `valid` for the slots it carries)."""
    c = core.config
    if c.keep_slot:
        raise ValueError("the cached memory holds the window only, not the kept slot (keep_slot=True): a core with it recomputes its steps")
    steps, batch = first.shape
    carried, valid = core.memory_window(state)  # (B, S, D), (B, S)
    h = core.embed(x).transpose(0, 1)  # (B, T, D) x_t^0, every step a query
    # The steps' windows side by side: slot i is m_{i-S}; step t reads slots t .. t + S - 1, and
    # the last step's own m_{T-1} is nobody's.
    written = torch.cat([carried.to(h.dtype), memory[:-1].transpose(0, 1).to(h.dtype)], dim=1).detach()  # (B, S + T - 1, D)
    starts = episode_starts(first, valid)  # (T, B) slot where each step's episode began
    distance, visible = _visible(starts, c.span)
    kv = [project(core.memory_norm[g], core.kv[g], written) for g in range(core.groups)]  # (B, S + T - 1, 2 D) each
    for layer, block in enumerate(core.blocks):
        keys, values = (split_heads(half, c.n_heads) for half in kv[0 if c.shared_kv else layer].chunk(2, dim=-1))  # (B, H, S + T - 1, E)
        h = block(h, keys, values, distance, visible)
    return core.norm_out(h).transpose(0, 1)  # (T, B, D)


def _visible(starts: torch.Tensor, span: int) -> tuple[torch.Tensor | int, torch.Tensor]:
    """Which memory slots each step reads, and from how far back (AttentionBlock.forward): starts
    (T, B) -> over all S + T - 1 slots, distance 1 (the slots consecutive steps, the last the step
    before the last step's) and visible (B, T, S + T - 1), slot i being S + t - i steps back from
    step t; or, for a call of many windows (WINDOWED_FROM), each step's own window: distance
    (1, S), visible (B, T, S)."""
    steps, device = starts.shape[0], starts.device
    if span + steps - 1 >= WINDOWED_FROM * span:
        slot = torch.arange(steps, device=device)[:, None] + torch.arange(span, device=device)  # (T, S): step t's window slot j
        return torch.arange(span, 0, -1, device=device)[None, :], slot[None] >= starts.T[:, :, None]
    slot = torch.arange(span + steps - 1, device=device)
    back = (span + torch.arange(steps, device=device))[:, None] - slot  # (T, S + T - 1) steps from step to slot
    visible = (back >= 1) & (back <= span) & (slot >= starts.T[:, :, None])  # (B, T, S + T - 1)
    return 1, visible
