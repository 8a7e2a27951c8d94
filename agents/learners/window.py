"""The gradient window: backpropagation through time further back than the rollout (--bptt K).

With the rollout alone as the learning pass (K = T), the gradient of an update reaches back T
steps: the core state the rollout starts from is a constant, so a cue seen more than T steps
before the step that is rewarded for it can never be learned, however good the memory. The
window keeps, for every env, the inputs of the K - T steps before the current rollout and the core
state from K steps back. The learner recomputes those K - T steps and the rollout's T in one core
call from that state with the current weights and takes the loss on the rollout's steps only:
truncated BPTT(k1 = T, k2 = K) in Williams and Peng's terms. Episode starts inside the window are
the core's to honour (`first`), as in any call, so nothing before an env's episode start reaches
its gradient.

After each update the window moves on: the rollout's steps are appended and the oldest steps
beyond K - T dropped, the state at the window's start advanced over the dropped steps by one
pass without gradients at the current weights (as the rollout's start state is the state acting
had, computed with the weights of the time). Until K - T steps have been seen, the window holds
fewer (the first updates reach back less).

Cost, against K = T: an update recomputes K + 1 steps instead of T + 1 (forward and backward, so
about K / T times the learning pass's time and activation memory) plus T steps without gradients
to advance the start state; the stored inputs are (K - T) x B x (N + 3) numbers.

Following the episode (--bptt episode). A fixed K covers a step's episode only when the episode
began at most K steps back, which depends on the rollout's phase: with T = 32 and episodes of
L + 2 steps in lockstep (the T-maze), K = L + 1 keeps the cue in the same backward pass as its
decision only when the episode started early enough in the rollout. `GradientWindow.following_episodes`
instead keeps, after each rollout, exactly what the episodes still running need: for each env the
steps since its running episode began (none where the next step begins one), so every step's
gradient reaches its episode's first step, whatever the phase. The stored length H is the most
any env needs (the batch is one tensor), so it varies from update to update; it is at most the
env's longest episode minus one, or `cap` (--bptt-max K: then K - T) where episodes are longer or
unbounded. Every env's running episode then begins inside the stored steps, so the state before
them matters to nothing (each env's core resets at its episode's first step) and no pass is
spent advancing it, unless the cap cut an episode.

Letters: T rollout steps, H stored steps (<= K - T), B envs, N flat observation columns.
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
    """The learning call's inputs: H stored steps, then the rollout's."""

    inputs: StepInputs  # (H + T [+ 1], B, ...)
    start_state: Any  # the core state before the first stored step
    skip: int  # H: outputs before this step are the stored steps', which carry no loss

    def select(self, index: torch.Tensor, on_device: torch.Tensor) -> WindowInputs:
        """The inputs of envs `index` ((K,) long on the host; `on_device` the same on the inputs'
        device), for PPO's minibatches."""
        return WindowInputs(self.inputs.select_envs(index, on_device), select_envs(self.start_state, on_device), self.skip)

    def call(self, policy, packed: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """policy's (logits, values) over these inputs; with `packed`, the episodes side by side
        where that shortens the call (agents/learners/episode_packing.py)."""
        return call_packed(policy, self.inputs if packed else replace(self.inputs, starts=None), self.start_state)


class GradientWindow:
    """Each env's last `stored` steps of inputs before the current rollout, and the core state
    before them. `stored` = K - T; 0 keeps nothing and the learner sees the rollout alone. Made
    by `following_episodes`, it keeps what the running episodes need, at most `stored` steps."""

    def __init__(self, stored: int | None, episodes: bool = False):
        if (stored is None and not episodes) or (stored is not None and stored < 0):
            raise ValueError(f"a gradient window stores K - T >= 0 steps (None: no cap, following episodes), got {stored}")
        self.stored = stored  # the most it keeps (following episodes, None: no cap)
        self.episodes = episodes
        self.inputs: StepInputs | None = None  # (H, B, ...), `starts` kept where the rollouts kept them
        self.start_state: Any = None

    @classmethod
    def following_episodes(cls, cap: int | None = None) -> GradientWindow:
        """A window that keeps each running episode's steps (see the module docstring), at most
        `cap` of them (None: no cap)."""
        return cls(cap, episodes=True)

    def __len__(self) -> int:
        """H: the steps stored now."""
        return 0 if self.inputs is None else len(self.inputs)

    def learning_inputs(self, r: Rollout, bootstrap: bool) -> WindowInputs:
        """The stored steps followed by the rollout's T steps (and its observation after the last
        step when `bootstrap`, for A2C's bootstrap value), from the state before the stored steps."""
        rollout = r.inputs.steps(stop=None if bootstrap else -1)
        if not len(self):
            return WindowInputs(rollout, r.start_state, 0)
        return WindowInputs(StepInputs.cat([self.inputs, rollout]), self.start_state, len(self))

    def advance(self, policy: torch.nn.Module, r: Rollout) -> None:
        """Append the rollout's T steps and drop the oldest beyond what is kept, moving the start
        state over the dropped steps with `policy` where it still matters (no gradients; call it
        under the run's autocast)."""
        if not self.stored and not self.episodes:
            return
        rollout = r.inputs  # (T + 1, B, ...)
        if rollout.starts is None and self.episodes:  # following episodes needs them: read them back
            rollout = replace(rollout, starts=rollout.first.cpu().numpy())
        new = rollout.steps(stop=-1)
        if not len(self):
            self.inputs, self.start_state = new, r.start_state
        else:
            self.inputs = StepInputs.cat([self.inputs, new])
        keep, needed = self.stored, None
        if self.episodes:
            needed = episode_steps(self.inputs.starts, rollout.starts[-1])  # (B,)
            keep = int(needed.max()) if self.stored is None else min(int(needed.max()), self.stored)
        dropped = len(self) - keep
        if dropped > 0:
            if needed is not None and (needed <= keep).all():  # every running episode begins in what is kept
                self.start_state = policy.initial_state(rollout.first.shape[1], rollout.first.device)
            else:
                with torch.no_grad():
                    _, _, self.start_state = policy(self.inputs.steps(stop=dropped), self.start_state)
            self.inputs = self.inputs.steps(start=dropped)

    def state_dict(self) -> dict[str, Any]:
        """The stored steps and start state on the CPU, for a checkpoint. The steps are saved as
        format 2 lays them out: a list [obs, prev_action, prev_reward, first] ((H, B, ...) each)."""
        inputs = None if self.inputs is None else [tensor.cpu() for tensor in (
            self.inputs.obs, self.inputs.prev_action, self.inputs.prev_reward, self.inputs.first)]
        start = None if self.start_state is None else state_to_plain(move_state(self.start_state, "cpu"))
        return {"stored": self.stored, "episodes": self.episodes, "inputs": inputs, "start_state": start}

    def load_state_dict(self, saved: dict[str, Any], device: torch.device) -> None:
        if (saved["stored"], saved.get("episodes", False)) != (self.stored, self.episodes):
            raise ValueError(f"the checkpoint's gradient window (stores {saved['stored']} steps, following episodes: "
                             f"{saved.get('episodes', False)}) is not this run's ({self.stored}, {self.episodes})")
        if saved["inputs"] is None:
            self.inputs = None
        else:
            obs, prev_action, prev_reward, first = saved["inputs"]
            self.inputs = StepInputs(obs, prev_action, prev_reward, first, first.cpu().numpy()).to(device)
        self.start_state = None if saved["start_state"] is None else move_state(state_from_plain(saved["start_state"]), device)

    def clear(self) -> None:
        """Forget the stored steps (episodes restart: nothing before them may matter)."""
        self.inputs, self.start_state = None, None


def episode_steps(starts: np.ndarray, next_first: np.ndarray) -> np.ndarray:
    """(B,) steps of `starts` ((H, B) bool: the steps' `first`) that each env's running episode
    needs: those from its last episode start on, none where the next step begins an episode, all
    H + 1 (more than stored) where it began before them."""
    steps = len(starts)
    last_start = np.where(starts.any(axis=0), steps - 1 - np.argmax(starts[::-1], axis=0), -1)  # (B,) -1: none
    return np.where(next_first, 0, steps - last_start)
