"""The gradient window: backpropagation through time further back than the rollout (--bptt K).

With the rollout alone as the learning pass (K = T), the gradient of an update reaches back T
steps: the core state the rollout starts from is a constant, so a cue seen more than T steps
before the step that is rewarded for it can never be learned, however good the memory. The
window keeps, for every env, the inputs of the K - T steps before the current rollout (its
history) and the core state from K steps back. The learner recomputes the history and the
rollout's T steps in one core call from that state with the current weights and takes the loss
on the rollout's steps only: truncated BPTT(k1 = T, k2 = K) in Williams and Peng's terms. Episode
starts inside the window are the core's to honour (`first`), as in any call, so nothing before an
env's episode start reaches its gradient.

Sizes, one name each, from the flag to the learning call:

    K = bptt          the flag (--bptt, A2CConfig.bptt): the steps an update's gradient reaches
                      back, the rollout's T included; the window is these K steps.
    max_history       K - T: the most steps the window keeps before the rollout (A2CConfig.max_history,
                      GradientWindow.max_history); following episodes, --bptt-max K - T, None
                      without a cap. A checkpoint saves it under the key "stored".
    history = H       the steps it keeps now, <= max_history: len(window), and
                      WindowInputs.history, the learning call's first H steps, which carry no loss.

After each update the window moves on: the rollout's steps are appended and the oldest steps
beyond max_history dropped, the state at the window's start advanced over the dropped steps by
one pass without gradients at the current weights (as the rollout's start state is the state
acting had, computed with the weights of the time). Until K - T steps have been seen, the history
is shorter (the first updates reach back less).

Cost, against K = T: an update recomputes K + 1 steps instead of T + 1 (forward and backward, so
about K / T times the learning pass's time and activation memory) plus T steps without gradients
to advance the start state; the history's inputs are (K - T) x B x (N + 3) numbers.

Following the episode (--bptt episode). A fixed K covers a step's episode only when the episode
began at most K steps back, which depends on the rollout's phase: with T = 32 and episodes of
L + 2 steps in lockstep (the T-maze), K = L + 1 keeps the cue in the same backward pass as its
decision only when the episode started early enough in the rollout. A window made with
`episodes=True` instead keeps, after each rollout, exactly what the episodes still running need:
for each env the steps since its running episode began (none where the next step begins one), so
every step's gradient reaches its episode's first step, whatever the phase. The history H is the
most any env needs (the batch is one tensor), so it varies from update to update; it is at most
the env's longest episode minus one, or max_history where episodes are longer or unbounded. Every
env's running episode then begins inside the history, so the state before it matters to nothing
(each env's core resets at its episode's first step) and no pass is spent advancing it, unless
max_history cut an episode.

Letters: T rollout steps, K = bptt, H history steps, B envs, N flat observation columns.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from agents.cores.state import move_state, select_envs, state_from_plain, state_to_plain
from agents.learners.episode_packing import call_packed
from agents.learners.rollout import Rollout
from agents.model.step_inputs import StepInputs


@dataclass(frozen=True)
class WindowInputs:
    """The learning call's inputs: the H history steps, then the rollout's."""

    inputs: StepInputs  # (H + T [+ 1], B, ...)
    start_state: Any  # the core state before the first history step
    history: int  # H: outputs before this step are the history's, which carry no loss

    def select(self, index: torch.Tensor, on_device: torch.Tensor) -> WindowInputs:
        """The inputs of envs `index` ((K,) long on the host; `on_device` the same on the inputs'
        device), for PPO's minibatches."""
        return WindowInputs(self.inputs.select_envs(index, on_device), select_envs(self.start_state, on_device), self.history)

    def call(self, policy, packed: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """policy's (logits, values) over these inputs, for the steps after the history (which
        carry no loss, so give none: Policy.forward's outputs_from); with `packed`, the episodes
        side by side where that shortens the call (agents/learners/episode_packing.py)."""
        return call_packed(policy, self.inputs if packed else replace(self.inputs, starts=None), self.start_state, self.history)


class GradientWindow:
    """Each env's history: its last `max_history` steps of inputs before the current rollout, and
    the core state before them (max_history = K - T; 0 keeps nothing and the learner sees the
    rollout alone). With `episodes`, the steps of each running episode (see the module docstring),
    at most `max_history` of them (None: no cap)."""

    def __init__(self, max_history: int | None, episodes: bool = False):
        if (max_history is None and not episodes) or (max_history is not None and max_history < 0):
            raise ValueError(f"a gradient window keeps max_history = K - T >= 0 steps (None: no cap, following episodes), "
                             f"got {max_history}")
        self.max_history = max_history
        self.episodes = episodes
        self.inputs: StepInputs | None = None  # the history, (H, B, ...); `starts` kept where the rollouts kept them
        self.start_state: Any = None  # the core state before the history

    def __len__(self) -> int:
        """H: the history's steps now."""
        return 0 if self.inputs is None else len(self.inputs)

    def learning_inputs(self, r: Rollout, bootstrap: bool) -> WindowInputs:
        """The history followed by the rollout's T steps (and its observation after the last step
        when `bootstrap`, for A2C's bootstrap value), from the state before the history."""
        rollout = r.inputs.steps(stop=None if bootstrap else -1)
        if not len(self):
            return WindowInputs(rollout, r.start_state, 0)
        return WindowInputs(StepInputs.cat([self.inputs, rollout]), self.start_state, len(self))

    def advance(self, policy: torch.nn.Module, r: Rollout) -> None:
        """Append the rollout's T steps to the history and drop the oldest beyond what is kept,
        moving the start state over the dropped steps with `policy` where it still matters (no
        gradients; call it under the run's autocast)."""
        if not self.max_history and not self.episodes:
            return
        rollout = r.inputs  # (T + 1, B, ...)
        if rollout.starts is None and self.episodes:  # following episodes needs them: read them back
            rollout = replace(rollout, starts=rollout.first.cpu().numpy())
        new = rollout.steps(stop=-1)
        if not len(self):
            self.inputs, self.start_state = new, r.start_state
        else:
            self.inputs = StepInputs.cat([self.inputs, new])
        keep, needed = self.max_history, None
        if self.episodes:
            needed = episode_steps(self.inputs.starts, rollout.starts[-1])  # (B,)
            keep = int(needed.max()) if self.max_history is None else min(int(needed.max()), self.max_history)
        dropped = len(self) - keep
        if dropped > 0:
            if needed is not None and (needed <= keep).all():  # every running episode begins in what is kept
                self.start_state = policy.initial_state(rollout.first.shape[1], rollout.first.device)
            else:
                with torch.no_grad():
                    _, _, self.start_state = policy(self.inputs.steps(stop=dropped), self.start_state)
            self.inputs = self.inputs.steps(start=dropped)

    def state_dict(self) -> dict[str, Any]:
        """The history and its start state on the CPU, for a checkpoint, as format 2 lays them out:
        max_history under "stored", the steps a list [obs, prev_action, prev_reward, first] ((H, B, ...) each)."""
        inputs = None if self.inputs is None else [tensor.cpu() for tensor in (
            self.inputs.obs, self.inputs.prev_action, self.inputs.prev_reward, self.inputs.first)]
        start = None if self.start_state is None else state_to_plain(move_state(self.start_state, "cpu"))
        return {"stored": self.max_history, "episodes": self.episodes, "inputs": inputs, "start_state": start}

    def load_state_dict(self, saved: dict[str, Any], device: torch.device) -> None:
        if (saved["stored"], saved.get("episodes", False)) != (self.max_history, self.episodes):
            raise ValueError(f"the checkpoint's gradient window (max_history {saved['stored']}, following episodes: "
                             f"{saved.get('episodes', False)}) is not this run's ({self.max_history}, {self.episodes})")
        if saved["inputs"] is None:
            self.inputs = None
        else:
            obs, prev_action, prev_reward, first = saved["inputs"]
            self.inputs = StepInputs(obs, prev_action, prev_reward, first, first.cpu().numpy()).to(device)
        self.start_state = None if saved["start_state"] is None else move_state(state_from_plain(saved["start_state"]), device)

    def clear(self) -> None:
        """Forget the history (episodes restart: nothing before them may matter)."""
        self.inputs, self.start_state = None, None


def episode_steps(starts: np.ndarray, next_first: np.ndarray) -> np.ndarray:
    """(B,) steps of `starts` ((H, B) bool: the history's `first`) that each env's running episode
    needs: those from its last episode start on, none where the next step begins an episode, all
    H + 1 (more than the history holds) where it began before them."""
    steps = len(starts)
    last_start = np.where(starts.any(axis=0), steps - 1 - np.argmax(starts[::-1], axis=0), -1)  # (B,) -1: none
    return np.where(next_first, 0, steps - last_start)
