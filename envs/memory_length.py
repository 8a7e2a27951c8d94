"""Memory length: recall one of `bits` random bits, shown once, `length` steps later, with nothing
to explore (bsuite's memory_len and memory_size, Osband et al., "Behaviour Suite for
Reinforcement Learning", ICLR 2020).

## Description
An episode lasts exactly L + 1 steps (L = `length`, default 10). Let t be the steps taken so
far (t = 0 at reset). At t = 0 the observation shows the context, `bits` bits (default 1), each
drawn 0 or 1 with probability 1/2 per episode; at t = L, the observation on which the last action
is chosen, it shows the query, an index drawn uniformly per episode; in between it shows neither.
The last action, step L + 1, must name the queried bit. Actions before it do nothing, so there
is no exploring to do: the task measures recall alone, across the L steps between the first
observation and the last decision. bsuite's memory_len sweeps L with one bit, memory_size the
number of bits at a short L.

## Action space
Discrete(2): the bit the agent answers, 0 or 1 (`python -m envs.play`: left arrow 0, right arrow
1). Only the action of step L + 1 counts.

## Observation encoding
MultiDiscrete([L + 1, bits + 1, 3, ..., 3]): (time to go, query, one feature per context bit).
- time to go: L - t, the steps that follow the one about to be chosen (L at reset, 0 at the
  last decision), and 0 again on the final observation, t = L + 1;
- query: the queried index + 1 at t = L, else 0;
- context bit i: 1 + bit i (1 for 0, 2 for 1) at t = 0, else 0.
With `show_time=False` the first feature is left out: MultiDiscrete([bits + 1, 3, ..., 3]).

bsuite's observation is floats: time to go 1 - t/L, the query index, the bits as -1/+1. Ours is
the same information in the non-negative integers that every encoder here embeds, so time to go
is one of L + 1 categories, each with its own learned embedding, where bsuite's is a ramp a
network can interpolate along. `show_time=False` removes the clock: the query still marks the
decision step, so an agent need not count to know when to answer, but neither can it tell from
the observation how long it has held the context.

bsuite's step returns the observation computed before its clock advances, so there the context
shows at t = 0 and again at t = 1, and its time to go at t >= 1 is (L - t + 1)/L, a step more
than ours (1/L at t = L); the query shows at t = L, as here.

## Rewards and termination
0 at steps 1 .. L. At step L + 1: +1 if the action equals the queried bit, else -1 (bsuite's);
that step terminates the episode. Returns are +1 or -1; the oracle gets +1, a uniformly random
policy 0 on average. Nothing is truncated and the env has no time limit of its own
(`max_episode_steps` None), as the T-maze: a limit of at most L steps cuts the task short.
`info["success"]` is True on the last step when the answer was right, False on every other step.

## Registered configurations
`FeedbackRL/MemoryLength-v0`: length 10, bits 1, show_time True, no registered time limit:
`gymnasium.make("FeedbackRL/MemoryLength-v0", length=50, bits=4)` runs 51 steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.batch import BatchedRules, check_int
from envs.scene import FLOOR, GOAL, GREEN, OBJECT, RED, WALL, Scene, corridor_column
from envs.single import GridEnv
from envs.vector import GridVectorEnv


class MemoryLengthRules(BatchedRules):
    """A batch of memory-length episodes. State: context (N, bits) of 0/1, query (N,) index."""

    def __init__(self, num_envs: int, length: int = 10, bits: int = 1, show_time: bool = True,
                 max_episode_steps: int | None = None):
        self.length = check_int("length", length, 1)
        self.bits = check_int("bits", bits, 1)
        if not isinstance(show_time, (bool, np.bool_)):
            raise ValueError(f"show_time must be True or False, got {show_time!r}")
        self.show_time = bool(show_time)
        super().__init__(num_envs, max_episode_steps)
        time = [self.length + 1] if self.show_time else []
        self.single_observation_space = spaces.MultiDiscrete(time + [self.bits + 1] + [3] * self.bits, dtype=np.int64)
        self.single_action_space = spaces.Discrete(2)
        self.uniforms_per_reset = self.bits + 1  # the context, then the query
        self.context = np.zeros((self.num_envs, self.bits), dtype=np.int64)
        self.query = np.zeros(self.num_envs, dtype=np.int64)
        self.success = np.zeros(self.num_envs, dtype=bool)

    @property
    def longest_episode(self) -> int:
        """L + 1: the rules end every episode then (a time limit may end it sooner)."""
        return min(self.length + 1, self.max_episode_steps or self.length + 1)

    def state_bounds(self) -> dict[str, tuple[int, int]]:
        return {**super().state_bounds(), "context": (0, 1), "query": (0, self.bits - 1)}

    def _new_episodes(self, idx: np.ndarray, u: np.ndarray) -> None:
        self.context[idx] = (u[:, : self.bits] < 0.5).astype(np.int64)
        self.query[idx] = np.minimum((u[:, self.bits] * self.bits).astype(np.int64), self.bits - 1)
        self.success[idx] = False

    def answer(self) -> np.ndarray:
        """(N,) the queried bit of each env: the right last action."""
        return self.context[np.arange(self.num_envs), self.query]

    def _act(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        last = self.elapsed + 1 >= self.length + 1  # this step is step L + 1
        self.success = last & (actions == self.answer())
        return np.where(last, np.where(self.success, 1.0, -1.0), 0.0), last

    def observe(self) -> np.ndarray:
        t = self.elapsed[:, None]  # (N, 1)
        query = np.where(t == self.length, self.query[:, None] + 1, 0)
        context = np.where(t == 0, self.context + 1, 0)  # (N, bits)
        time = [np.maximum(self.length - t, 0)] if self.show_time else []
        return np.concatenate(time + [query, context], axis=1)  # (N, F)

    def info(self) -> dict[str, np.ndarray]:
        return {"success": self.success.copy()}

    def hidden_state(self, i: int) -> dict[str, Any]:
        return {"context": self.context[i].tolist(), "query": int(self.query[i])}

    def scene(self, i: int) -> Scene:
        """Walled all round: the context as a row of balls (green 1, red 0), under it the goal
        ring below the queried bit (for the viewer; the agent sees the query at t = L only), and
        under that a track of L + 2 cells along which the agent moves one cell a step (a long one
        drawn shortened, see scene.corridor_column). The agent's view is highlighted: the context
        at t = 0, the ring at t = L."""
        t, cells = int(self.elapsed[i]), self.length + 2
        track = corridor_column(cells - 1, cells) + 1
        tiles = np.full((5, max(self.bits, track) + 2), WALL, dtype=np.int64)
        tiles[1, 1 : self.bits + 1] = OBJECT + np.where(self.context[i] == 1, GREEN, RED)
        tiles[2, 1 : self.bits + 1] = FLOOR
        tiles[2, 1 + self.query[i]] = GOAL
        tiles[3, 1 : track + 1] = FLOOR
        agent = (3, corridor_column(min(t, cells - 1), cells) + 1)
        context = [(1, 1 + b) for b in range(self.bits)] if t == 0 else []
        query = [(2, 1 + int(self.query[i]))] if t == self.length else []
        view = [agent] + context + query
        caption = f"step {t}/{self.length + 1}  query bit {self.query[i]} = {self.answer()[i]}"
        return Scene(tiles, agent, None, view, None, caption)


class MemoryLengthEnv(GridEnv):
    __doc__ = __doc__
    rules_class = MemoryLengthRules
    key_actions = {"left": 0, "right": 1}


class MemoryLengthVectorEnv(GridVectorEnv):
    __doc__ = __doc__
    rules_class = MemoryLengthRules
