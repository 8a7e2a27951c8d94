"""One update's loss on a batch of replayed sequences.

`replayed_q` runs a policy over K sequences from their start state: the first `burn_in` steps
without gradient and without outputs (R2D2's burn-in: they rebuild the core's memory with the
current weights), then the rest, whose Q values it returns. Both networks run the same way:
the online network with gradients, the target network without, each from its own burn-in.
`td_loss` regresses the online Q of each action taken to its n-step target
(agents/learners/dqn/targets.py) over the loss steps whose targets are complete.

Letters: M steps, K sequences, A actions, N flat observation columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from agents.learners.dqn.targets import bootstrap_values, n_step_targets
from agents.model.policy import Policy
from agents.model.step_inputs import StepInputs


@dataclass
class Batch:
    """K replayed sequences of M steps on the learner device, time-major."""

    inputs: StepInputs  # (M, K, ...): obs, prev_action, prev_reward, first
    start_state: Any  # the core state before step 0
    valid: torch.Tensor  # (M, K) bool
    action: torch.Tensor  # (M, K) long
    reward: torch.Tensor  # (M, K) float32
    terminated: torch.Tensor  # (M, K) bool
    truncated: torch.Tensor  # (M, K) bool


def replayed_q(policy: Policy, inputs: StepInputs, start_state: Any, burn_in: int) -> torch.Tensor:
    """Q (M - burn_in, K, A) of the steps after the burn-in, from `start_state` before step 0."""
    state = start_state
    if burn_in:
        with torch.no_grad():
            _, _, state = policy(inputs.steps(0, burn_in), state)
    q, _, _ = policy(inputs.steps(burn_in), state)
    return q


def td_loss(online: Policy, target: Policy, batch: Batch, burn_in: int, loss_steps: int | None, gamma: float, n: int,
            double: bool, kind: str) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The mean `kind` ("mse" or "huber") TD loss over the complete loss steps (the first
    `loss_steps` after the burn-in, or all), and its statistics."""
    q = replayed_q(online, batch.inputs, batch.start_state, burn_in).float()  # (M', K, A), M' = M - burn_in
    with torch.no_grad():
        q_next = replayed_q(target, batch.inputs, batch.start_state, burn_in).float()
        bootstrap = bootstrap_values(q.detach(), q_next, double)  # (M', K)
        after = slice(burn_in, None)
        goal, complete = n_step_targets(batch.reward[after], batch.terminated[after], batch.truncated[after],
                                        batch.valid[after], bootstrap, gamma, n)
        if loss_steps is not None:
            complete[loss_steps:] = False
    taken = q.gather(-1, batch.action[after].unsqueeze(-1)).squeeze(-1)  # (M', K)
    weight = complete.float()
    count = weight.sum().clamp(min=1.0)
    if kind == "huber":
        errors = F.smooth_l1_loss(taken, goal, reduction="none")
    else:
        errors = (taken - goal).square()
    loss = (errors * weight).sum() / count
    stats = {"td_loss": loss.detach(), "q_taken": (taken.detach() * weight).sum() / count,
             "target": (goal * weight).sum() / count, "loss_steps": weight.sum()}
    return loss, stats
