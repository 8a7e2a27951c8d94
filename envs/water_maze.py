"""Water maze: find a hidden goal on an open grid whose cells are known only by random IDs
(Fan et al., 6.1 and 7.3; after Morris's water maze).

## Description
An open `size` x `size` grid (default 15). Each episode draws a goal cell and a random
permutation mapping cells to IDs; both stay fixed within the episode. The agent observes the
ID of its own cell and the ID of the goal cell, so it must learn the episode's map as it moves.
To help exploration it also sees where the goal is when it is within the 3x3 area around it.
On reaching the goal it gets +1 and is teleported to a random cell other than the goal.

## Action space
Discrete(4): move 0 up (north), 1 right, 2 down, 3 left. A move off the grid does nothing.

## Observation encoding
MultiDiscrete([size**2, size**2, 10]): ID of the agent's cell, ID of the goal cell, and the
goal's place in the 3x3 area around the agent (0..8 row-major, north up; 9 when not in it).

## Rewards and termination
+1 for each time the goal is reached. No termination; truncation at `max_episode_steps` (200).
`info["goals_reached"]` counts the goals reached so far in the episode.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs import grid
from envs.batch import BatchedRules, check_int, episode_key, event_choice
from envs.scene import FLOOR, GOAL, Scene
from envs.single import GridEnv
from envs.vector import GridVectorEnv

NOT_IN_VIEW = 9


class WaterMazeRules(BatchedRules):
    """A batch of water mazes.

    State: agent row and column (N,), goal row and column (N,), cell IDs (N, size*size), goals
    reached (N,), and the episode's key, from which each teleport's destination is drawn.
    """

    def __init__(self, num_envs: int, size: int = 15, max_episode_steps: int = 200):
        super().__init__(num_envs, max_episode_steps)
        self.size = check_int("size", size, 2)
        cells = self.size * self.size
        self.single_observation_space = spaces.MultiDiscrete([cells, cells, NOT_IN_VIEW + 1], dtype=np.int64)
        self.single_action_space = spaces.Discrete(4)
        # goal, start, episode key, one sort key per cell for the ID permutation
        self.uniforms_per_reset = 3 + cells

        n = self.num_envs
        self.row = np.zeros(n, dtype=np.int64)
        self.col = np.zeros(n, dtype=np.int64)
        self.goal_row = np.zeros(n, dtype=np.int64)
        self.goal_col = np.zeros(n, dtype=np.int64)
        self.cell_ids = np.zeros((n, cells), dtype=np.int64)  # (N, size*size) ID of each flat cell
        self.goals_reached = np.zeros(n, dtype=np.int64)
        self.key = np.zeros(n, dtype=np.uint64)
        self._row_start = np.arange(n) * cells

    def state_bounds(self) -> dict[str, tuple[int, int]]:
        last, cells = self.size - 1, self.size * self.size
        return {**super().state_bounds(), "row": (0, last), "col": (0, last), "goal_row": (0, last), "goal_col": (0, last),
                "cell_ids": (0, cells - 1), "goals_reached": (0, np.iinfo(np.int64).max)}

    def _new_episodes(self, idx: np.ndarray, u: np.ndarray) -> None:
        cells = self.size * self.size
        goal = np.floor(u[:, 0] * cells).astype(np.int64)
        start = self._other_cell(goal, u[:, 1])
        self.goal_row[idx], self.goal_col[idx] = np.divmod(goal, self.size)
        self.row[idx], self.col[idx] = np.divmod(start, self.size)
        self.key[idx] = episode_key(u[:, 2])
        self.cell_ids[idx] = np.argsort(u[:, 3:], axis=1, kind="stable")
        self.goals_reached[idx] = 0

    def _other_cell(self, goal: np.ndarray, u: np.ndarray) -> np.ndarray:
        """A uniformly random cell other than `goal`, from uniforms u."""
        cells = self.size * self.size
        return (goal + 1 + np.floor(u * (cells - 1)).astype(np.int64)) % cells

    def _act(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        np.clip(self.row + grid.DIRECTIONS[actions, 0], 0, self.size - 1, out=self.row)
        np.clip(self.col + grid.DIRECTIONS[actions, 1], 0, self.size - 1, out=self.col)
        reached = (self.row == self.goal_row) & (self.col == self.goal_col)
        if reached.any():
            hit = np.flatnonzero(reached)
            cells = self.size * self.size
            # land on (goal + offset) mod cells, offset 1 .. cells - 1: any cell but the goal
            offset = 1 + event_choice(self.key[hit], self.goals_reached[hit], cells - 1)
            landing = (self.goal_row[hit] * self.size + self.goal_col[hit] + offset) % cells
            self.row[hit], self.col[hit] = np.divmod(landing, self.size)
            self.goals_reached[hit] += 1
        return reached.astype(np.float64), np.zeros(self.num_envs, dtype=bool)

    def observe(self) -> np.ndarray:
        obs = np.empty((self.num_envs, 3), dtype=np.int64)
        obs[:, 0] = self.cell_ids.take(self._row_start + self.row * self.size + self.col)
        obs[:, 1] = self.cell_ids.take(self._row_start + self.goal_row * self.size + self.goal_col)
        dr = self.goal_row - self.row
        dc = self.goal_col - self.col
        in_view = (np.abs(dr) <= 1) & (np.abs(dc) <= 1)
        obs[:, 2] = np.where(in_view, (dr + 1) * 3 + dc + 1, NOT_IN_VIEW)
        return obs

    def info(self) -> dict[str, np.ndarray]:
        return {"goals_reached": self.goals_reached.copy()}

    def hidden_state(self, i: int) -> dict[str, Any]:
        return {
            "position": (int(self.row[i]), int(self.col[i])),
            "goal": (int(self.goal_row[i]), int(self.goal_col[i])),
            "cell_ids": self.cell_ids[i].reshape(self.size, self.size).copy(),
            "goals_reached": int(self.goals_reached[i]),
        }

    def scene(self, i: int) -> Scene:
        tiles = np.full((self.size, self.size), FLOOR, dtype=np.int64)
        tiles[self.goal_row[i], self.goal_col[i]] = GOAL
        agent = (int(self.row[i]), int(self.col[i]))
        view = [
            (agent[0] + dr, agent[1] + dc)
            for dr in (-1, 0, 1)
            for dc in (-1, 0, 1)
            if 0 <= agent[0] + dr < self.size and 0 <= agent[1] + dc < self.size
        ]
        caption = f"step {self.elapsed[i]}/{self.max_episode_steps}  goals {self.goals_reached[i]}"
        return Scene(tiles, agent, None, view, None, caption)


class WaterMazeEnv(GridEnv):
    __doc__ = __doc__
    rules_class = WaterMazeRules
    key_actions = {"up": grid.UP, "right": grid.RIGHT, "down": grid.DOWN, "left": grid.LEFT}


class WaterMazeVectorEnv(GridVectorEnv):
    __doc__ = __doc__
    rules_class = WaterMazeRules
