"""A recurrent DQN run's hyperparameters: A2C's (agents/config/a2c_config.py: the env, core, presets,
optimiser, run folder, solve check, ...) and the off-policy learner's own.

`rollout` keeps its meaning, T steps of every env acted between two learning phases; each
phase then takes `updates_per_step` optimiser steps per frame acted (its fraction carried to the
next phase). A2C's own fields (GAE, the value and entropy weights, the gradient window, the
acting-graph learner, CUDA-graph acting) mean nothing here and are refused if set.

Defaults follow Ni et al. (NeurIPS 2023, twni2016/Memory-RL) where they give one: whole-episode
replay, double DQN, 1-step targets, Polyak tau 0.005 every update, 0.25 updates a frame, MSE,
epsilon from 1 to 1/T over the first 10% of training (`--epsilon-schedule ni`). Their batch of 64
episodes is lowered to 32 here for a CPU; set `--batch-size 64` for theirs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

from agents.config.a2c_config import A2CConfig
from agents.config.search_space import Search
from agents.cores.checks import check_bool, check_float

REPLAYS = ("auto", "episodes", "segments")
SEGMENT_STATES = ("stored", "empty")
EPSILON_SCHEDULES = ("ni", "linear", "constant")
LOSSES = ("mse", "huber")
LEARNERS = ("recompute",)  # the learner always runs the replayed sequences again
# A2C fields DQN does not read: refused unless left at A2C's default, so a flag is never silently ignored.
NOT_DQN = ("gae_lambda", "value_coef", "entropy_coef", "bptt", "bptt_max", "pack_episodes", "cuda_graph")


@dataclass
class DQNConfig(A2CConfig):
    learner: str = field(default="recompute", metadata={"help": "recompute: the learner runs each replayed sequence from its start state"})
    replay: str = field(default="auto", metadata={
        "help": f"one of {REPLAYS}: episodes stores whole episodes (needs episodes of bounded length), segments fixed-length "
                "segments with the core state at their start and a burn-in (R2D2); auto: episodes where the env bounds them"})
    replay_capacity: int = field(default=1_000_000, metadata={"help": "transitions (env steps) the replay holds"})
    replay_sequences: int = field(default=0, metadata={"help": "at most this many episodes or segments (0: as many as --replay-capacity holds)"})
    segment_length: int = field(default=40, metadata={"help": "segments: steps of a segment that carry a loss (after its burn-in)"})
    burn_in: int = field(default=20, metadata={"help": "segments: steps run before a segment's loss steps, from its start state, without gradient"})
    segment_state: str = field(default="stored", metadata={
        "help": f"one of {SEGMENT_STATES}: segments start from the core state acting had there (stored), or from the empty state, "
                "the burn-in rebuilding the memory (empty: for cores whose state cannot be stored per segment, the Transformer "
                "and the Feedback core; exact for the Transformer where burn-in >= n_layers x span)"})
    batch_size: int = field(default=32, metadata={"help": "episodes or segments per update (Ni et al.: 64)"})
    updates_per_step: float = field(default=0.25, metadata={"help": "optimiser steps per env frame (all envs' frames)"})
    learning_starts: int = field(default=10_000, metadata={"help": "env frames acted before the first update"})
    n_step: int = field(default=1, metadata={"help": "n of the n-step targets"})
    double_q: bool = field(default=True, metadata={"help": "double DQN: the online network picks the next action, the target values it"})
    tau: float = field(default=0.005, metadata={"help": "target network update: target <- tau * online + (1 - tau) * target (1: a copy)"})
    target_every: int = field(default=1, metadata={"help": "optimiser steps between target network updates"})
    loss: str = field(default="mse", metadata={"help": f"one of {LOSSES}: the TD error's loss"})
    epsilon_schedule: str = field(default="ni", metadata={
        "help": f"one of {EPSILON_SCHEDULES}: ni, 1 to 1/T (T the longest episode) over the first 10%% of --total-steps (Ni et al.); "
                "linear, --epsilon-start to --epsilon-end over --epsilon-fraction of it; constant, --epsilon-end"})
    epsilon_start: float = field(default=1.0, metadata={"help": "linear: epsilon at frame 0"})
    epsilon_end: float = field(default=0.05, metadata={"help": "linear: epsilon after the decay; constant: epsilon throughout"})
    epsilon_fraction: float = field(default=0.1, metadata={"help": "linear: the share of --total-steps over which epsilon decays"})

    learners: ClassVar[tuple[str, ...]] = LEARNERS
    search_space: ClassVar[dict[str, Search]] = {
        "learning_rate": Search(1e-5, 1e-2, log=True),
        "gamma": Search(choices=(0.9, 0.95, 0.98, 0.99, 0.995, 0.999)),
        "n_step": Search(choices=(1, 3, 5)),
        "updates_per_step": Search(choices=(0.05, 0.1, 0.25, 0.5)),
        "tau": Search(choices=(0.001, 0.005, 0.01, 1.0)),
    }

    def __post_init__(self):
        super().__post_init__()
        defaults = {f.name: f.default for f in dataclasses.fields(A2CConfig)}
        changed = [name for name in NOT_DQN if getattr(self, name) != defaults[name]]
        if changed:
            raise ValueError(f"{', '.join(f'{name}={getattr(self, name)!r}' for name in changed)}: A2C's, which DQN does not read; "
                             f"leave {', '.join('--' + name.replace('_', '-') for name in changed)} unset")
        for name, choices in (("replay", REPLAYS), ("segment_state", SEGMENT_STATES), ("epsilon_schedule", EPSILON_SCHEDULES),
                              ("loss", LOSSES)):
            if getattr(self, name) not in choices:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; choose from {list(choices)}")
        for name in ("replay_capacity", "segment_length", "batch_size", "n_step", "target_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("replay_sequences", "burn_in", "learning_starts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        check_bool("double_q", self.double_q)
        check_float("updates_per_step", self.updates_per_step, 0, low_open=True)
        check_float("tau", self.tau, 0, 1, low_open=True)
        for name in ("epsilon_start", "epsilon_end"):
            check_float(name, getattr(self, name), 0, 1)
        check_float("epsilon_fraction", self.epsilon_fraction, 0, 1, low_open=True)
        if self.epsilon_schedule == "linear" and self.epsilon_end > self.epsilon_start:
            raise ValueError(f"epsilon_end ({self.epsilon_end}) must be <= epsilon_start ({self.epsilon_start}): epsilon decays")
