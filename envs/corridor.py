"""Corridor: remember a colour while walking down a long corridor (Fan et al., section 4.1.1).

## Description
The agent starts at one end of a corridor of `length` cells, beside a blue or green cue. The cue
is visible only from the start cell. At the far end the agent sees two doors, one blue and one
green. It must enter the door of the cue's colour.

`doors` sets the doors' up/down order:
- "random" (default, the paper's): drawn per episode, so the door to enter is the cue XOR the
  upper door's colour; the agent must remember the colour and read the doors at the end.
- "fixed": the blue door is always the upper one, so the cue alone says up or down.
Both draw the same two uniforms per episode (cue, door order; "fixed" ignores the second), so
the same seed gives the same cues under either setting.

## Action space
Discrete(4): 0 forward, 1 back, 2 enter the upper door, 3 enter the lower door. Moves stop at the
corridor's ends; the door actions do nothing before the far end.

## Observation encoding
MultiDiscrete([3, 3, 3]): (cue, upper door, lower door), each 0 not visible, 1 blue, 2 green.
The cue shows only at the start cell, the doors only at the far end; in between all three are 0.

## Rewards and termination
Entering the matching door gives +1, the other door 0; either ends the episode. `info["success"]`
is True on the step the agent enters the matching door, `info["arrived"]` on the step it enters
either (success / arrived: how often an agent that gets to the doors remembers the cue).

## Registered configurations
`FeedbackRL/Corridor-v0`: length 16, doors "random", time limit 64 (4 x length). Changing
`length` does not change the registered limit: pass `max_episode_steps` too (or -1 to
gymnasium.make, leaving the env's own default of 4 x length).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.batch import BatchedRules, check_choice, check_int
from envs.scene import BLUE, DOOR, FLOOR, GREEN, OBJECT, WALL, Scene, corridor_column
from envs.single import GridEnv
from envs.vector import GridVectorEnv

FORWARD, BACK, ENTER_UPPER, ENTER_LOWER = 0, 1, 2, 3
NOT_VISIBLE, BLUE_SEEN, GREEN_SEEN = 0, 1, 2  # observation values; colour c is seen as c
SCENE_COLOUR = {BLUE_SEEN: BLUE, GREEN_SEEN: GREEN}
STEP = np.array([1, -1, 0, 0])  # position change per action
DOORS = ("random", "fixed")  # the `doors` option: the up/down order of the doors


class CorridorRules(BatchedRules):
    """A batch of corridors. State: position (N,), cue colour (N,), upper door colour (N,)."""

    def __init__(self, num_envs: int, length: int = 16, max_episode_steps: int | None = None, doors: str = "random"):
        self.length = check_int("length", length, 2)
        self.doors = check_choice("doors", doors, DOORS)
        if max_episode_steps is None:
            max_episode_steps = 4 * self.length
        super().__init__(num_envs, max_episode_steps)
        self.single_observation_space = spaces.MultiDiscrete([3, 3, 3], dtype=np.int64)
        self.single_action_space = spaces.Discrete(4)
        self.uniforms_per_reset = 2  # cue colour, door order (drawn under doors="fixed" too, unused)
        self.position = np.zeros(self.num_envs, dtype=np.int64)
        self.cue = np.full(self.num_envs, BLUE_SEEN, dtype=np.int64)
        self.upper = np.full(self.num_envs, BLUE_SEEN, dtype=np.int64)  # lower door: 3 - upper
        self.success = np.zeros(self.num_envs, dtype=bool)
        self.arrived = np.zeros(self.num_envs, dtype=bool)

    def state_bounds(self) -> dict[str, tuple[int, int]]:
        return {**super().state_bounds(), "position": (0, self.length - 1), "cue": (BLUE_SEEN, GREEN_SEEN), "upper": (BLUE_SEEN, GREEN_SEEN)}

    def _new_episodes(self, idx: np.ndarray, u: np.ndarray) -> None:
        self.position[idx] = 0
        self.cue[idx] = np.where(u[:, 0] < 0.5, BLUE_SEEN, GREEN_SEEN)
        self.upper[idx] = np.where((u[:, 1] < 0.5) | (self.doors == "fixed"), BLUE_SEEN, GREEN_SEEN)
        self.success[idx] = False
        self.arrived[idx] = False

    def _act(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at_end = self.position == self.length - 1
        entered = at_end & (actions >= ENTER_UPPER)
        door = np.where(actions == ENTER_UPPER, self.upper, 3 - self.upper)
        self.success = entered & (door == self.cue)
        self.arrived = entered.copy()  # not the returned array itself: new episodes clear this one
        np.clip(self.position + STEP[actions], 0, self.length - 1, out=self.position)
        return self.success.astype(np.float64), entered

    def observe(self) -> np.ndarray:
        at_end = self.position == self.length - 1
        obs = np.empty((self.num_envs, 3), dtype=np.int64)
        obs[:, 0] = np.where(self.position == 0, self.cue, NOT_VISIBLE)
        obs[:, 1] = np.where(at_end, self.upper, NOT_VISIBLE)
        obs[:, 2] = np.where(at_end, 3 - self.upper, NOT_VISIBLE)
        return obs

    def info(self) -> dict[str, np.ndarray]:
        return {"success": self.success.copy(), "arrived": self.arrived.copy()}

    def hidden_state(self, i: int) -> dict[str, Any]:
        return {
            "position": int(self.position[i]),
            "cue": int(self.cue[i]),
            "upper_door": int(self.upper[i]),
            "lower_door": int(3 - self.upper[i]),
        }

    def scene(self, i: int) -> Scene:
        """The corridor as a 3-row strip walled all round: the cue in the wall behind the start
        cell, the doors above and below the end cell (a long corridor drawn shortened, see
        scene.corridor_column)."""
        end = corridor_column(self.length - 1, self.length) + 1  # the end cell's column
        tiles = np.full((3, end + 2), WALL, dtype=np.int64)
        tiles[1, 1:-1] = FLOOR
        tiles[1, 0] = OBJECT + SCENE_COLOUR[int(self.cue[i])]
        tiles[0, end] = DOOR + SCENE_COLOUR[int(self.upper[i])]
        tiles[2, end] = DOOR + SCENE_COLOUR[int(3 - self.upper[i])]
        agent = (1, corridor_column(self.position[i], self.length) + 1)
        view = [agent]
        if self.position[i] == 0:
            view.append((1, 0))
        if self.position[i] == self.length - 1:
            view += [(0, agent[1]), (2, agent[1])]
        caption = f"step {self.elapsed[i]}/{self.max_episode_steps}"
        return Scene(tiles, agent, None, view, None, caption)


class CorridorEnv(GridEnv):
    __doc__ = __doc__
    rules_class = CorridorRules
    key_actions = {"right": FORWARD, "left": BACK, "up": ENTER_UPPER, "down": ENTER_LOWER}


class CorridorVectorEnv(GridVectorEnv):
    __doc__ = __doc__
    rules_class = CorridorRules
