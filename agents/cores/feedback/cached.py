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


def cached_forward(core: FeedbackReference, x: torch.Tensor, state, first: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
    """x: (T, B, input_dim) inputs, `state` the core state before step 0, first: (T, B) bool,
    memory: (T, B, D) the m_t that steps 0 .. T - 1 wrote while acting -> y: (T, B, D).

    Step t reads the window m_{t-S} .. m_{t-1} of the state's last S slots followed by `memory`,
    from its episode's start on (`first`; the state's `valid` for the slots it carries)."""
    c = core.config
    steps, batch = first.shape
    carried, valid = core.memory_window(state)  # (B, S, D), (B, S)
    h = core.embed(x).transpose(0, 1)  # (B, T, D) x_t^0, every step a query
    # The steps' windows side by side: slot i is m_{i-S}; step t reads slots t .. t + S - 1, and
    # the last step's own m_{T-1} is nobody's.
    written = torch.cat([carried.to(h.dtype), memory[:-1].transpose(0, 1).to(h.dtype)], dim=1).detach()  # (B, S + T - 1, D)
    starts = episode_starts(first, valid)  # (T, B) slot where each step's episode began
    slot = torch.arange(steps, device=first.device)[:, None] + torch.arange(c.span, device=first.device)  # (T, S)
    visible = slot[None] >= starts.T[:, :, None]  # (B, T, S): query t's window slot j, from its episode's start
    distance = torch.arange(c.span, 0, -1, device=first.device)[None, :]  # (1, S): window slot j is S - j steps back
    kv = [project(core.memory_norm[g], core.kv[g], written) for g in range(core.groups)]  # (B, S + T - 1, 2 D) each
    for layer, block in enumerate(core.blocks):
        keys, values = (split_heads(half, c.n_heads) for half in kv[0 if c.shared_kv else layer].chunk(2, dim=-1))  # (B, H, S + T - 1, E)
        h = block(h, keys, values, distance, visible)
    return core.norm_out(h).transpose(0, 1)  # (T, B, D)
