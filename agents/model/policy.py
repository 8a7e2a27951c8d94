"""The agent: observation encoder, memory core, actor and critic heads.

Input per step: the env's observation, flattened (agents/runtime/observations.py) and encoded by the
encoder its space calls for (agents/model/encoders: for our envs' `MultiDiscrete`, one embedding per
feature), the previous action (its own embedding, with an extra "none" entry used at episode
starts) and the previous reward (a scalar, clipped to [-1, 1]); with `previous_inputs=False`
the observation only (an agent that sees its own last action can carry a cue in its behaviour
instead of its memory: on the corridor, turning towards the cue's door). These are concatenated and fed to the core, whose output
gives the action logits and the state value. The core carries its memory through `state` and
forgets at `first`, exactly as the core interface says (agents/cores/__init__.py).

Letters: T steps, B envs, N flat observation columns, A actions.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from torch import nn

from agents.cores import make_core
from agents.cores.feedback.cached import cached_forward
from agents.model.encoders import make_encoder
from agents.model.step_inputs import StepInputs

# How the actor and critic heads start. "pytorch" (the default): nn.Linear's own init, as
# TorchBeast's A2C / IMPALA nets (the paper's code base) have it; a fresh policy is a confident
# random one (mean top-action probability 0.61 on the maze's 3 actions at paper sizes).
# "orthogonal", as CleanRL and stable-baselines3 do: orthogonal weights, actor gain 0.01 (a near-
# uniform fresh policy), critic gain 1, zero biases. Measured on the corridor and the maze
# (experiments/head_init.py, README), the orthogonal heads learn memory later: the tiny actor
# weights pass the policy gradient back into the core 20-40 times weaker, while only the policy
# gradient asks the core to remember the cue (the value of a guess at the doors is 0.5 either way).
HEAD_INITS = ("orthogonal", "pytorch")


class Policy(nn.Module):
    def __init__(
        self, obs_space: gym.Space, num_actions: int, core: str, core_options: dict[str, Any], embed_dim: int = 16,
        head_init: str = "pytorch", previous_inputs: bool = True,
    ):
        super().__init__()
        if embed_dim < 1:
            raise ValueError(f"embed_dim must be >= 1, got {embed_dim}")
        if head_init not in HEAD_INITS:
            raise ValueError(f"unknown head_init {head_init!r}; choose from {list(HEAD_INITS)}")
        self.num_actions = int(num_actions)
        self.encoder = make_encoder(obs_space, embed_dim)
        self.register_load_state_dict_pre_hook(_rename_old_embedding)
        self.previous_inputs = previous_inputs
        self.action_embed = nn.Embedding(self.num_actions + 1, embed_dim) if previous_inputs else None  # last row: no previous action
        input_dim = self.encoder.output_dim + ((embed_dim + 1) if previous_inputs else 0)
        self.core = make_core(core, input_dim, **core_options)
        self.actor = nn.Linear(self.core.output_dim, self.num_actions)
        self.critic = nn.Linear(self.core.output_dim, 1)
        if head_init == "orthogonal":
            for head, gain in ((self.actor, 0.01), (self.critic, 1.0)):
                nn.init.orthogonal_(head.weight, gain)
                nn.init.zeros_(head.bias)

    def initial_state(self, batch_size: int, device: torch.device | str):
        return self.core.initial_state(batch_size, device)

    def encode(self, obs, prev_action, prev_reward):
        """obs (..., N), prev_action (...) long (num_actions = none), prev_reward (...) ->
        the core's input (..., input_dim)."""
        features = self.encoder(obs)  # (..., encoder width)
        if not self.previous_inputs:
            return features
        action = self.action_embed(prev_action)  # (..., embed)
        reward = prev_reward.clamp(-1.0, 1.0).unsqueeze(-1)  # (..., 1)
        return torch.cat([features, action, reward], dim=-1)

    def forward(self, inputs: StepInputs, state, outputs_from: int = 0):
        """inputs of T steps of B envs (agents/model/step_inputs.py), the core state before them ->
        logits (T', B, A), value (T', B), new core state, for the steps from `outputs_from` on
        (T' = T - outputs_from). The steps before it give no outputs: a gradient window's history
        (agents/learners/window.py), which carries no loss. A core whose `skips_outputs` is True
        is told, and saves their work (the Transformer); the others' outputs are cut."""
        x = self.encode(inputs.obs, inputs.prev_action, inputs.prev_reward)
        if outputs_from and getattr(self.core, "skips_outputs", False):
            y, state = self.core(x, state, inputs.first, outputs_from)
        else:
            y, state = self.core(x, state, inputs.first)
            y = y[outputs_from:]
        return self.actor(y), self.critic(y).squeeze(-1), state

    def cached_memory_call(self, inputs: StepInputs, state, memory: torch.Tensor):
        """forward()'s logits (T, B, A) and value (T, B) over T steps, all at once, from the memory
        (T, B, D) those steps wrote while acting, held fixed (agents/cores/feedback/cached.py: the
        Feedback core only); no state after."""
        y = cached_forward(self.core, self.encode(inputs.obs, inputs.prev_action, inputs.prev_reward), state, inputs.first, memory)
        return self.actor(y), self.critic(y).squeeze(-1)

    def observe(self, obs: torch.Tensor, mask: torch.Tensor) -> None:
        """Update the encoder's input statistics (if it keeps any) with the observations (..., N)
        where mask (...) is True."""
        self.encoder.observe(obs, mask)

    @property
    def can_open(self) -> bool:
        """Whether the core can be fed one step at a time within one call (see open)."""
        return hasattr(self.core, "open")

    def open(self, state, steps: int) -> "PolicyRun":
        """Up to `steps` steps of one core call fed a step at a time, so the graph of a whole
        rollout can be kept while acting (only for cores with `open`, e.g. feedback)."""
        if not self.can_open:
            raise ValueError(f"core {type(self.core).__name__} cannot be fed one step at a time")
        return PolicyRun(self, self.core.open(state, steps))


class PolicyRun:
    """A policy call advanced a step at a time: step(...) -> logits, value to act on (no
    gradients); outputs() -> all steps' logits and values with gradients (the core hands its
    outputs over at once: the Feedback core's backward then runs as one pass); finish() -> state."""

    def __init__(self, policy: Policy, core_run):
        self.policy, self.core_run = policy, core_run

    def step(self, inputs: StepInputs):
        """inputs of one step of B envs ((1, B, ...) each) -> logits (B, A), value (B,)."""
        if len(inputs) != 1:
            raise ValueError(f"a policy run takes one step at a time, got {len(inputs)} steps")
        y = self.core_run.step(self.policy.encode(inputs.obs[0], inputs.prev_action[0], inputs.prev_reward[0]), inputs.first[0])
        with torch.no_grad():
            return self.policy.actor(y), self.policy.critic(y).squeeze(-1)

    def outputs(self):
        """logits (T, B, A), value (T, B) of the steps taken, with gradients when opened with them."""
        y = self.core_run.outputs()
        return self.policy.actor(y), self.policy.critic(y).squeeze(-1)

    def finish(self):
        return self.core_run.finish()


def _rename_old_embedding(module, state_dict, prefix, *args) -> None:
    """Checkpoints written before encoders were chosen by space hold the MultiDiscrete table as
    `obs_embed.weight`; it is now `encoder.embedding.weight` (the same table)."""
    old = prefix + "obs_embed.weight"
    if old in state_dict:
        state_dict[prefix + "encoder.embedding.weight"] = state_dict.pop(old)
