"""Passive T-maze: remember up or down, shown once, across a corridor of `length` cells (Ni et al.,
"When Do Transformers Shine in RL? Decoupling Memory from Credit Assignment", NeurIPS 2023).

## Description
A corridor of cells x = 0 .. `length` (L, default 10) ends in a T-junction at x = L, with a goal
candidate above it (y = +1) and one below (y = -1). The agent starts at x = 0, where it is told
which candidate is the goal, up or down (drawn per episode with probability 1/2 each); the
corridor cells all look the same. An episode lasts exactly L + 1 steps: the optimal agent walks
L steps to the junction and steps onto the goal on the last one, so it must remember the start's
signal for all L + 1 steps, while the penalty below tells it at once when it dawdles.

## Action space
Discrete(4), Ni et al.'s order: 0 right (+x), 1 up (+y), 2 left (-x), 3 down (-y). A move into
a wall does nothing: along the corridor only right and left move, at the junction up and down.
From a goal candidate only the move back to the junction leads anywhere.

## Observation encoding
MultiDiscrete([2, 3]): (at the junction, signal).
- at the junction: 1 on the junction and the two candidates, else 0;
- signal: on a candidate the agent's own side, 1 up, 2 down; elsewhere (start, corridor,
  junction) the goal, 1 up, 2 down, at step 0, and 0 after it.
So the start cell after step 0 and every corridor cell show (0, 0). With `expose_goal=True` the
signal off the candidates shows the goal at every step, not only at step 0; nothing else changes.
A candidate is reached on step L + 1 at the earliest, so every observation an action is chosen on
then shows the goal. This is Ni et al.'s ambiguous observation [a, b], b in {-1, 0, +1}, written
as (a, b mod 3): the same information, in the non-negative integers every encoder and library
here takes.

## Rewards and termination
At step t = 1 .. L (t counts the steps taken, this one included) a penalty, by `penalty`:
- "schedule" (Ni et al.'s, the default): -1/L if x < t after the move, that is, whenever the
  agent is behind the schedule of one cell right per step (not only on the steps it fails to
  move right: one lost step costs -1/L on every later step up to L), else 0;
- "action" (AMAGO's TMazeAlt, after Memory-RL issue #1): -1/L if the action is not right, else
  0, wherever the agent is and however far behind: one lost step costs -1/L once.
At step L + 1: +1 if the agent stands on the goal candidate, 0 on the other candidate or
anywhere else, and no penalty. Returns therefore lie in [-1, 1]; the oracle gets 1.
Step L + 1 terminates the episode (a true end: Ni et al.'s done, which their trainer does not
bootstrap), and nothing is truncated: their gym TimeLimit of L + 1 adds no truncation flag to a
step that is done. So the env has no time limit of its own (`max_episode_steps` None); a limit
of at most L steps truncates the episode there (Ni et al.'s task no longer), a limit of L + 1
also reports truncated=True on the last step as gymnasium's TimeLimit does, and a longer one is
never reached. `info["success"]` is True on the last step when the goal is reached;
`info["arrived"]` when the agent stands on either candidate then (it walked the corridor in
time and turned): success / arrived is how often an agent that gets there remembers the side,
which tells a failure of memory (arrived 1, success 0.5) from one of walking (arrived 0).

## What is fixed, against Ni et al.'s code
Read at twni2016/Memory-RL commit c9b8b398 (envs/tmaze.py and configs/envs/tmaze_passive.py,
last changed at fe890092): `TMazeClassicPassive` with the config's penalty. Their options are
fixed as follows: `ambiguous_position=True` (the corridor cells look alike), `add_timestep=False`
(no time step in the observation), `oracle_length=0` (the goal is shown where the agent starts:
passive), `episode_length=L + 1`, `goal_reward=1`, `penalty=-1/L`, `distract_reward=0` (the
config's default). The options here:
- `length`: their `corridor_length`;
- `expose_goal` (default False, theirs): True shows the goal at every step, so that a policy
  without memory can solve the task: a core that fails then fails to explore, not to remember.
  Theirs needs `ambiguous_position=False` and adds a third feature; ours keeps the corridor
  ambiguous and the two features, the goal in the signal;
- `penalty` (default "schedule", theirs): "action" is AMAGO's (UT-Austin-RPL/amago,
  amago/envs/builtin/tmaze.py, `TMazeAlt`), at the same -1/L.
Their observation is a float Box; ours is the MultiDiscrete above. Their goal side comes from
numpy's global generator; ours from the env's seeded one, like every env here.

## Registered configurations
`FeedbackRL/PassiveTMaze-v0`: length 10, penalty "schedule", expose_goal False, no registered
time limit, so that the episode follows `length`: `gymnasium.make("FeedbackRL/PassiveTMaze-v0",
length=50)` runs 51 steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.batch import BatchedRules, check_choice, check_int
from envs.scene import FLOOR, GOAL, GREEN, OBJECT, WALL, Scene, corridor_column
from envs.single import GridEnv
from envs.vector import GridVectorEnv

RIGHT, UP, LEFT, DOWN = 0, 1, 2, 3
MOVE_X = np.array([1, 0, -1, 0])  # x change per action
MOVE_Y = np.array([0, 1, 0, -1])  # y change per action (+1 up)
UP_SIDE, DOWN_SIDE = 1, -1  # the goal's y; observed as y mod 3: 1 up, 2 down
PENALTIES = ("schedule", "action")


class PassiveTMazeRules(BatchedRules):
    """A batch of passive T-mazes. State: x (N,), y (N,), goal side (N,) in {+1, -1}."""

    def __init__(self, num_envs: int, length: int = 10, penalty: str = "schedule", expose_goal: bool = False,
                 max_episode_steps: int | None = None):
        self.length = check_int("length", length, 1)
        self.penalty = check_choice("penalty", penalty, PENALTIES)
        if not isinstance(expose_goal, (bool, np.bool_)):
            raise ValueError(f"expose_goal must be True or False, got {expose_goal!r}")
        self.expose_goal = bool(expose_goal)
        super().__init__(num_envs, max_episode_steps)
        self.single_observation_space = spaces.MultiDiscrete([2, 3], dtype=np.int64)
        self.single_action_space = spaces.Discrete(4)
        self.uniforms_per_reset = 1  # goal side
        self.x = np.zeros(self.num_envs, dtype=np.int64)
        self.y = np.zeros(self.num_envs, dtype=np.int64)
        self.goal = np.full(self.num_envs, UP_SIDE, dtype=np.int64)
        self.success = np.zeros(self.num_envs, dtype=bool)
        self.arrived = np.zeros(self.num_envs, dtype=bool)

    @property
    def longest_episode(self) -> int:
        """L + 1: the rules end every episode then (a time limit may end it sooner)."""
        return min(self.length + 1, self.max_episode_steps or self.length + 1)

    def state_bounds(self) -> dict[str, tuple[int, int]]:
        return {**super().state_bounds(), "x": (0, self.length), "y": (DOWN_SIDE, UP_SIDE), "goal": (DOWN_SIDE, UP_SIDE)}

    def _new_episodes(self, idx: np.ndarray, u: np.ndarray) -> None:
        self.x[idx] = 0
        self.y[idx] = 0
        self.goal[idx] = np.where(u[:, 0] < 0.5, UP_SIDE, DOWN_SIDE)
        self.success[idx] = False
        self.arrived[idx] = False

    def _act(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, y = self.x + MOVE_X[actions], self.y + MOVE_Y[actions]
        open_cell = ((y == 0) & (x >= 0) & (x <= self.length)) | ((x == self.length) & (np.abs(y) == 1))
        self.x = np.where(open_cell, x, self.x)
        self.y = np.where(open_cell, y, self.y)
        t = self.elapsed + 1  # steps taken, this one included
        last = t >= self.length + 1
        self.success = last & (self.y == self.goal)
        self.arrived = last & (self.y != 0)
        charged = self.x < t if self.penalty == "schedule" else actions != RIGHT
        penalty = np.where(charged, -1.0 / self.length, 0.0)
        return np.where(last, self.success.astype(np.float64), penalty), last

    def observe(self) -> np.ndarray:
        at_junction = self.x == self.length
        shown = self.expose_goal | (self.elapsed == 0)
        signal = np.where(self.y != 0, self.y, np.where(shown, self.goal, 0))
        return np.stack([at_junction.astype(np.int64), signal % 3], axis=1)  # (N, 2)

    def info(self) -> dict[str, np.ndarray]:
        return {"success": self.success.copy(), "arrived": self.arrived.copy()}

    def hidden_state(self, i: int) -> dict[str, Any]:
        return {"x": int(self.x[i]), "y": int(self.y[i]), "goal": int(self.goal[i])}

    def scene(self, i: int) -> Scene:
        """The T as a 3-row strip walled all round: the corridor in the middle row, a green cue
        in the wall beside the start cell on the goal's side (highlighted while it is seen), the
        goal ring (for the viewer) on that side of the junction and floor on the other (a long
        corridor drawn shortened, see scene.corridor_column)."""
        junction = corridor_column(self.length, self.length + 1) + 1
        tiles = np.full((3, junction + 2), WALL, dtype=np.int64)
        tiles[1, 1:-1] = FLOOR
        goal_row = 1 - int(self.goal[i])  # y = +1 is the top row
        tiles[goal_row, 1] = OBJECT + GREEN
        tiles[goal_row, junction] = GOAL
        tiles[2 - goal_row, junction] = FLOOR
        agent = (1 - int(self.y[i]), corridor_column(self.x[i], self.length + 1) + 1)
        view = [agent] + ([(goal_row, 1)] if self.elapsed[i] == 0 or self.expose_goal else [])
        caption = f"step {self.elapsed[i]}/{self.length + 1}  x {self.x[i]}/{self.length}"
        return Scene(tiles, agent, None, view, None, caption)


class PassiveTMazeEnv(GridEnv):
    __doc__ = __doc__
    rules_class = PassiveTMazeRules
    key_actions = {"right": RIGHT, "up": UP, "left": LEFT, "down": DOWN}


class PassiveTMazeVectorEnv(GridVectorEnv):
    __doc__ = __doc__
    rules_class = PassiveTMazeRules
