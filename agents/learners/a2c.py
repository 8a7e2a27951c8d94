"""A2C: n-step returns with GAE(lambda), and the loss on one rollout.

A rollout has T steps over B envs. Step t starts from observation o_t, takes action a_t, gets
reward r_t, and may end the episode: `terminated` (a true end: nothing follows, no bootstrap) or
`truncated` (the time limit: the episode could go on, so bootstrap from the value of the last
observation). Envs run with gymnasium's NEXT_STEP autoreset: after an episode ends, the next
step shows its last observation (its value is the truncation bootstrap), the env ignores that
step's action and returns the next episode's first observation with reward 0. Such a step is not
a transition of any episode: `valid` is False there and it carries no loss.

Letters: T steps, B envs, A actions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.distributions import Categorical


def gae_advantages(
    rewards: torch.Tensor,  # (T, B)
    values: torch.Tensor,  # (T + 1, B): values of o_0 .. o_T (o_T: the observation after the rollout)
    terminated: torch.Tensor,  # (T, B) bool
    truncated: torch.Tensor,  # (T, B) bool
    valid: torch.Tensor,  # (T, B) bool
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Advantages (T, B), zero where not valid; returns are advantages + values[:-1].

    delta_t = r_t + gamma * V(o_{t+1}) * (not terminated_t) - V(o_t)
    A_t = delta_t + gamma * lam * A_{t+1}, the sum cut where the episode ends at t.
    lam = 1 gives the plain n-step return of A2C; lam = 0 one-step TD.
    """
    values = values.detach()
    not_terminated = (~terminated).to(values.dtype)
    continues = (~(terminated | truncated)).to(values.dtype)
    deltas = rewards + gamma * values[1:] * not_terminated - values[:-1]
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + gamma * lam * continues[t] * running
        running = running * valid[t]
        advantages[t] = running
    return advantages


@dataclass
class Clip:
    """PPO's clipping (agents/learners/ppo.py): the log-probabilities and values the policy had when it
    acted, and how far from them an update may move before its gradient stops."""

    old_logprob: torch.Tensor  # (T, B)
    old_values: torch.Tensor  # (T, B)
    coef: float
    clip_values: bool


def a2c_loss(
    logits: torch.Tensor,  # (T, B, A)
    values: torch.Tensor,  # (T, B) with gradients
    actions: torch.Tensor,  # (T, B) long
    advantages: torch.Tensor,  # (T, B)
    returns: torch.Tensor,  # (T, B)
    valid: torch.Tensor,  # (T, B) bool
    value_coef: float,
    entropy_coef: float,
    count: torch.Tensor | None = None,
    clip: Clip | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Policy gradient + value_coef * squared error / 2 - entropy_coef * entropy, means over
    valid steps. Also returns the parts and the explained variance (detached).

    `count` divides the sums instead of this rollout's valid steps: under torchrun, the valid
    steps of all ranks, so the ranks' losses sum to the loss of the whole batch (a plain average
    of per-rank means would weight a rank's steps by how few valid steps it had).

    With `clip` this is PPO's loss, on the same path: the policy term becomes the clipped
    surrogate min(r A, clip(r, 1 - eps, 1 + eps) A) of the ratio r = pi / pi_old, whose gradient
    at r = 1 is the policy gradient above, and (clip.clip_values) the value error the larger of
    the plain and the clipped one; the stats add approx_kl (the (r - 1) - log r estimator) and
    clipfrac, CleanRL's keys."""
    weight = valid.to(values.dtype)
    count = (weight.sum() if count is None else count).clamp(min=1.0)
    distribution = Categorical(logits=logits, validate_args=False)  # validation reads its checks back to the host
    log_prob = distribution.log_prob(actions)
    advantages, returns = advantages.detach(), returns.detach()
    value_error = (values - returns).square()
    stats = {}
    if clip is None:
        surrogate = log_prob * advantages
    else:
        log_ratio = log_prob - clip.old_logprob
        ratio = log_ratio.exp()
        surrogate = torch.minimum(ratio * advantages, ratio.clamp(1 - clip.coef, 1 + clip.coef) * advantages)
        if clip.clip_values:
            clipped = clip.old_values + (values - clip.old_values).clamp(-clip.coef, clip.coef)
            value_error = torch.maximum(value_error, (clipped - returns).square())
        with torch.no_grad():
            stats["approx_kl"] = (((ratio - 1) - log_ratio) * weight).sum() / count
            stats["clipfrac"] = (((ratio - 1).abs() > clip.coef).to(weight.dtype) * weight).sum() / count
    policy_loss = -(surrogate * weight).sum() / count
    value_loss = 0.5 * (value_error * weight).sum() / count
    entropy = (distribution.entropy() * weight).sum() / count
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    stats.update({
        "policy_loss": policy_loss.detach(),
        "value_loss": value_loss.detach(),
        "entropy": entropy.detach(),
        "explained_variance": explained_variance(values.detach(), returns, valid),
    })
    return loss, stats


def explained_variance(predicted: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """1 - Var(target - predicted) / Var(target) over masked entries (nan when Var(target) = 0
    or no entry is masked in). Weighted by the mask rather than indexed by it: boolean indexing
    has a data-dependent shape, a host synchronisation on CUDA."""
    weight = mask.to(target.dtype)
    count = weight.sum()
    return 1.0 - masked_variance(target - predicted, weight, count) / masked_variance(target, weight, count)


def masked_variance(x: torch.Tensor, weight: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """The population variance of the entries of x where weight is 1 (weight 0 or 1, count its sum)."""
    mean = (x * weight).sum() / count
    return ((x - mean).square() * weight).sum() / count
