"""Acting: running the policy on the env pool step by step, with memory carried across calls.

`Actor` holds what carries from one step to the next: the current observation, whether it begins
an episode (`first`) or is the last observation of an ended one (`valid` False: NEXT_STEP
autoreset shows it for one step, see agents/learners/a2c.py), the previous action and reward, the core
state, and the running return and length of each env's episode. `collect` fills a `Rollout` of T
steps for the learner; evaluate.py calls `step` directly.

Letters: T steps, B envs, N flat observation columns (agents/runtime/observations.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agents.cores.state import move_state, state_from_plain, state_to_plain
from agents.learners.graphed_acting import GraphedActing
from agents.model.policy import Policy
from agents.model.step_inputs import StepInputs
from agents.runtime.staging import Staging

# The host arrays that carry from one step to the next (and into a checkpoint), beside the core state.
CARRIED_ARRAYS = ("obs", "first", "valid", "prev_action", "prev_reward", "episode_return", "episode_length")


@dataclass
class Rollout:
    """T steps of B envs on the learner device; index T of the (T + 1) tensors is the
    observation after the last step (for the bootstrap value)."""

    # (T + 1, B, ...): obs, prev_action, prev_reward, first, and `starts` (first on the host, for
    # packing episodes: agents/learners/episode_packing.py; None where not kept: the learner then runs unpacked)
    inputs: StepInputs
    valid: torch.Tensor  # (T, B) bool
    action: torch.Tensor  # (T, B) long
    reward: torch.Tensor  # (T, B)
    terminated: torch.Tensor  # (T, B) bool
    truncated: torch.Tensor  # (T, B) bool
    start_state: Any  # the core state before step 0
    # When acting kept the graph (Actor.collect(keep_graph=True)), the policy's outputs:
    logits: torch.Tensor | None = None  # (T, B, A) with gradients
    values: torch.Tensor | None = None  # (T + 1, B): with gradients, and the bootstrap value last
    # When acting kept what it chose with (Actor.collect(keep_outputs=True), for PPO), without gradients:
    logprob: torch.Tensor | None = None  # (T, B) float32: log pi(action) when it was taken
    # (and `values` above, float32 and detached, the bootstrap value last)
    # When acting kept the memory each step wrote (Actor.collect(keep_memory=True), PPO's cached_memory learner):
    memory: torch.Tensor | None = None  # (T, B, D) the Feedback core's m_t, without gradients


@dataclass
class Episodes:
    """Episodes that ended during some steps: (E,) arrays of return, length and env metrics."""

    values: dict[str, list[float]] = field(default_factory=lambda: {"return": [], "length": []})

    def add(self, key: str, values: np.ndarray) -> None:
        self.values.setdefault(key, []).extend(np.asarray(values, dtype=np.float64).tolist())

    def __len__(self) -> int:
        return len(self.values["return"])


class Actor:
    """Steps `pool` with `policy`; the policy runs on `device`, the envs on the CPU.

    `slots` = (first, total): the pool's envs are envs first .. first + B - 1 of a batch of
    `total` (under torchrun each rank owns one share). Sampling draws its noise for the whole
    batch and keeps this share's rows, so each rank's actions are exactly those that one process
    stepping all `total` envs would take in these slots (the ranks' generators are seeded alike).

    `graphed`: acting without gradients (`collect` without keep_graph) goes through it, the
    policy's step replayed from a CUDA graph (agents/learners/graphed_acting.py); between rollouts
    `state` is the core's own state as ever."""

    def __init__(self, pool, policy: Policy, device: torch.device, slots: tuple[int, int] | None = None,
                 graphed: GraphedActing | None = None):
        self.pool, self.policy, self.device, self.graphed = pool, policy, device, graphed
        self.num_envs = pool.num_envs
        self.first_slot, self.total_envs = slots or (0, pool.num_envs)
        self.staging = Staging(device)  # each step's inputs cross in one copy (agents/runtime/staging.py)
        self.bytes_to_host = 0  # the actions read back
        self.restart()

    def restart(self) -> None:
        """Begin fresh episodes in every env (from the pool's seed) with empty memory."""
        B = self.num_envs
        self.obs = self.pool.reset()  # (B, N) numpy
        self.first = np.ones(B, dtype=bool)
        self.valid = np.ones(B, dtype=bool)
        self.prev_action = np.full(B, self.policy.num_actions, dtype=np.int64)  # "none"
        self.prev_reward = np.zeros(B, dtype=np.float32)
        self.episode_return = np.zeros(B)
        self.episode_length = np.zeros(B, dtype=np.int64)
        self.state = self.policy.initial_state(B, self.device)

    def staged(self) -> tuple[StepInputs, torch.Tensor]:
        """The current step's policy inputs, (1, B, ...) on the device with `first` also on the
        host, and valid (B,) on the device; what crosses to the device crosses in one copy."""
        obs, prev_action, prev_reward, first, valid = self.staging.to_device(
            [self.obs, self.prev_action, self.prev_reward, self.first, self.valid])
        return StepInputs(obs[None], prev_action[None], prev_reward[None], first[None], self.first[None]), valid

    def step(self, greedy: bool = False) -> tuple[dict[str, np.ndarray], Episodes]:
        """One step of every env. Returns the step's record (numpy, (B,) each) and the episodes
        that ended on it."""
        inputs, _ = self.staged()
        with torch.no_grad():
            logits, _, self.state = self.policy(inputs, self.state)
        record, ended, _ = self._act(logits[0], greedy)
        return record, ended

    def choose(self, logits: torch.Tensor, greedy: bool) -> torch.Tensor:
        """Actions (B,) long from (B, A) logits, on their device: sampled, or the likeliest."""
        if greedy:
            return logits.argmax(-1)
        # torch.multinomial's own one-sample method (argmax of p / Exp(1) noise, the same
        # draws on the CPU), with the noise drawn for every slot of the batch (see slots).
        noise = torch.empty(self.total_envs, logits.shape[-1], device=logits.device).exponential_()  # (total, A)
        return (torch.softmax(logits.float(), -1) / noise[self.first_slot : self.first_slot + self.num_envs]).argmax(-1)

    def _act(self, logits: torch.Tensor, greedy: bool) -> tuple[dict[str, np.ndarray], Episodes, torch.Tensor]:
        """Choose actions from (B, A) logits, step the envs, and move to the next step. The
        actions cross to the host here, the one read-back an acting step needs (the envs run
        there). Returns the step's record (numpy), the episodes ended and the actions on the device."""
        chosen = self.choose(logits, greedy)
        action = chosen.cpu().numpy()
        self.bytes_to_host += action.nbytes
        next_obs, reward, terminated, truncated, info = self.pool.step(action)
        record = dict(obs=self.obs, prev_action=self.prev_action, prev_reward=self.prev_reward, first=self.first,
                      valid=self.valid, action=action, reward=reward, terminated=terminated, truncated=truncated)
        ended = self._advance(next_obs, action, reward, terminated | truncated, info)
        return record, ended, chosen

    def _advance(self, next_obs, action, reward, ended, info) -> Episodes:
        """Book-keeping after a step: episode statistics and the next step's inputs."""
        self.episode_return += np.where(self.valid, reward, 0.0)
        self.episode_length += self.valid
        episodes = Episodes()
        if ended.any():
            episodes.add("return", self.episode_return[ended])
            episodes.add("length", self.episode_length[ended])
            for key, values in info.items():
                episodes.add(key, values[ended])
            self.episode_return[ended] = 0.0
            self.episode_length[ended] = 0
        next_first = ~self.valid  # after a last observation comes the next episode's first
        self.obs = next_obs
        self.prev_action = np.where(next_first, self.policy.num_actions, action)
        self.prev_reward = np.where(next_first, 0.0, reward).astype(np.float32)
        self.first, self.valid = next_first, ~ended
        return episodes

    def collect(self, steps: int, keep_graph: bool = False, keep_outputs: bool = False,
                keep_memory: bool = False) -> tuple[Rollout, Episodes]:
        """T = `steps` steps of every env, for the learner. keep_graph: act through one core
        call fed a step at a time with gradients on (Policy.open), and hand the learner the
        logits and values, so it need not run the chunk again. keep_outputs (without keep_graph):
        keep each step's log-probability of the action taken and value, and the bootstrap value,
        as PPO's reference point. keep_memory (acting without gradients): keep the memory vector
        each step wrote (cores with `written_memory`: the Feedback core, and its ring when acting
        is graphed), which PPO's cached_memory learner reads instead of recomputing it.

        What the rollout holds of the steps' inputs and actions is what already crossed to the
        device for acting (one copy per step, agents/runtime/staging.py); the rewards and ends cross
        once at the end, in one more copy."""
        start_state = self.state
        run = self.policy.open(self.state, steps) if keep_graph else None
        graphed = self.graphed if run is None else None
        if graphed is not None:
            graphed.begin(self.state)
        inputs, valid, actions, records, episodes = [], [], [], [], Episodes()
        logprobs, values, memory = [], [], []
        for _ in range(steps):
            step_inputs, step_valid = self.staged()  # (1, B, ...) and (B,)
            if run is not None:
                logits, value = run.step(step_inputs)
            elif graphed is not None:
                logits, value = graphed.act(step_inputs)
                if keep_memory:
                    memory.append(graphed.written_memory())
            else:
                with torch.no_grad():
                    logits, value, self.state = self.policy(step_inputs, self.state)
                logits, value = logits[0], value[0]
                if keep_memory:  # a view: later steps write later slots, or new buffers
                    memory.append(self.policy.core.written_memory(self.state))
            record, ended, chosen = self._act(logits, greedy=False)
            if keep_outputs:
                logprobs.append(torch.log_softmax(logits.float(), -1).gather(-1, chosen[:, None])[:, 0])
                values.append(value.float())
            inputs.append(step_inputs)
            valid.append(step_valid)
            actions.append(chosen)
            records.append(record)
            for key, ended_values in ended.values.items():
                episodes.add(key, ended_values)
        last, _ = self.staged()  # the observation after the last step: the bootstrap value's
        reward, terminated, truncated = self.staging.to_device([
            np.stack([r["reward"] for r in records]).astype(np.float32), np.stack([r["terminated"] for r in records]),
            np.stack([r["truncated"] for r in records]),
        ])
        rollout = Rollout(
            inputs=StepInputs.cat([*inputs, last]), valid=torch.stack(valid), action=torch.stack(actions), reward=reward,
            terminated=terminated, truncated=truncated, start_state=start_state,
        )
        if keep_memory:
            if len(memory) != steps:
                raise ValueError("keep_memory reads the core state after each step: act without keep_graph")
            rollout.memory = torch.stack(memory)
        if run is not None:
            rollout.logits, values = run.outputs()
            self.state = run.finish()
            with torch.no_grad():  # the bootstrap value; the state it makes is not kept
                _, bootstrap, _ = self.policy(last, self.state)
            rollout.values = torch.cat([values, bootstrap])
        elif keep_outputs:
            bootstrap = self._bootstrap(last, graphed)
            rollout.logprob, rollout.values = torch.stack(logprobs), torch.stack([*values, bootstrap.float()])
        elif graphed is not None:
            self.state = graphed.end()
        return rollout, episodes

    def _bootstrap(self, last: StepInputs, graphed: GraphedActing | None) -> torch.Tensor:
        """The value (B,) of the observation after a rollout, from the state after its steps (not
        kept): one more replay where acting is graphed (its state taken first)."""
        if graphed is not None:
            self.state = graphed.end()
            return graphed.act(last)[1]
        with torch.no_grad():
            return self.policy(last, self.state)[1][0]

    def carry(self) -> dict[str, Any]:
        """What continues into the next step, for a checkpoint: the host arrays as tensors, the
        core state as plain data on the CPU (agents/cores/state.py)."""
        carry = {name: torch.from_numpy(getattr(self, name).copy()) for name in CARRIED_ARRAYS}
        return {**carry, "state": state_to_plain(move_state(self.state, "cpu"))}

    def load_carry(self, carry: dict[str, Any]) -> None:
        """Continue from what carry() returned (the core state onto this actor's device)."""
        for name in CARRIED_ARRAYS:
            array = carry[name].numpy()
            if array.shape[0] != self.num_envs:
                raise ValueError(f"the saved actor's {name!r} has {array.shape[0]} envs, this one {self.num_envs}")
            setattr(self, name, array.copy())
        self.state = move_state(state_from_plain(carry["state"]), self.device)
