"""Epsilon-greedy acting: the trainers' Actor (agents/learners/rollout.py) with its choice of action
replaced.

With probability `epsilon` an env takes an action drawn uniformly, else the one of highest Q (the
policy's action head). The draws come from torch's global generator on the CPU, for every slot of
the batch whatever the device, so a resumed run (the generator saved with it) draws the same ones.
"""

from __future__ import annotations

import torch

from agents.learners.rollout import Actor


class EpsilonGreedyActor(Actor):
    epsilon = 0.0  # set by the trainer before each step

    def choose(self, q: torch.Tensor, greedy: bool) -> torch.Tensor:
        """Actions (B,) long from Q values (B, A), on their device."""
        best = q.argmax(-1)
        if greedy:
            return best
        rows = slice(self.first_slot, self.first_slot + self.num_envs)
        explore = torch.rand(self.total_envs)[rows] < self.epsilon  # (B,)
        random = torch.randint(q.shape[-1], (self.total_envs,))[rows]
        return torch.where(explore.to(q.device), random.to(q.device), best)
