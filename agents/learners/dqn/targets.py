"""What a replayed sequence's steps are regressed to: n-step targets with double DQN's bootstrap.

For step t of a sequence (valid: it took an action), with h = n, or fewer where the episode ends:

    G_t = r_t + g r_{t+1} + ... + g^{h-1} r_{t+h-1} + g^h B_{t+h}

- terminated at step t + k (k < n): h = k + 1 and no bootstrap (a true end);
- truncated at step t + k: h = k + 1 and B from step t + k + 1, the episode's last observation
  (the step with valid False that acting showed after it);
- otherwise h = n and B from step t + n of the same episode.

B_s, the bootstrap value of step s, is double DQN's Q_target(s, argmax_a Q_online(s, a)) (van
Hasselt et al. 2016), or DQN's max_a Q_target(s, a). A target that needs a step past the
sequence's end is incomplete and carries no loss (`complete` False): a segment's last n steps
learn in the next segment.

Letters: M steps, K sequences, A actions.
"""

from __future__ import annotations

import torch


def bootstrap_values(q_online: torch.Tensor, q_target: torch.Tensor, double: bool) -> torch.Tensor:
    """(M, K, A) Q values of the online and target networks (no gradient) -> B (M, K)."""
    if double:
        best = q_online.argmax(-1, keepdim=True)  # (M, K, 1): the online network picks
        return q_target.gather(-1, best).squeeze(-1)  # the target network values it
    return q_target.max(-1).values


def shifted(x: torch.Tensor, k: int, fill=0) -> torch.Tensor:
    """x[t + k] at t, `fill` past the end: (M, ...) -> (M, ...)."""
    if k == 0:
        return x
    pad = torch.full_like(x[:k], fill)
    return torch.cat([x[k:], pad])[: len(x)] if k < len(x) else torch.full_like(x, fill)


def n_step_targets(reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor, valid: torch.Tensor,
                   bootstrap: torch.Tensor, gamma: float, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """reward (M, K) float, terminated, truncated, valid (M, K) bool, bootstrap (M, K) B_s ->
    target (M, K) G_t and complete (M, K) bool (valid, and the target within the sequence)."""
    M = reward.shape[0]
    steps = torch.arange(M, device=reward.device).view(M, *([1] * (reward.dim() - 1)))  # (M, 1)
    target = torch.zeros_like(reward)
    complete = torch.zeros_like(valid)
    summing = valid.clone()  # still adding rewards
    for k in range(n):
        inside = steps + k < M  # step t + k is in the sequence
        summing = summing & inside
        target = target + torch.where(summing, gamma**k * shifted(reward, k), 0.0)
        ends_true = summing & shifted(terminated, k, False)
        cut = summing & shifted(truncated, k, False)
        cut_inside = cut & (steps + k + 1 < M)
        target = target + torch.where(cut_inside, gamma ** (k + 1) * shifted(bootstrap, k + 1), 0.0)
        complete = complete | ends_true | cut_inside
        summing = summing & ~ends_true & ~cut
    reach = summing & (steps + n < M)
    target = target + torch.where(reach, gamma**n * shifted(bootstrap, n), 0.0)
    return target, complete | reach
