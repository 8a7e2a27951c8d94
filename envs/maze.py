"""Maze: find objects of a given colour in a random maze, seeing only the 3x3 area around you
(Fan et al., 4.2.2 and 7.2; the easy variant 6.1).

## Description
Each episode draws a new `size` x `size` maze (default 9: Kruskal's algorithm, every dead end
opened; see `maze_layout.py`) with `num_objects` objects of distinct colours on distinct floor
cells, the agent on another floor cell, and a random target colour. Reaching the object of the
target colour gives +1 and a new target colour (one of the others). Objects stay put and can be
walked over.

`FeedbackRL/Maze-v0`: the agent has a heading, and sees the 3x3 area rotated so that its heading
is up. `FeedbackRL/MazeEasy-v0`: no heading, the 3x3 area with north up.

## Action space
Maze: Discrete(3): 0 forward, 1 turn left, 2 turn right.
MazeEasy: Discrete(4): move 0 up (north), 1 right, 2 down, 3 left.
A move into a wall leaves the agent where it is.

## Observation encoding
MultiDiscrete([2 + num_objects] * 9 + [num_objects]): the 9 cells of the 3x3 area, row-major as
the agent sees them (the agent's own cell in the middle), each 0 floor, 1 wall, 2 + c an object
of colour c; then the target colour c.

## Rewards and termination
+1 for each target reached. No termination; truncation at `max_episode_steps` (200).
`info["targets_reached"]` counts the targets reached so far in the episode.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs import grid
from envs.batch import BatchedRules, check_int, episode_key, event_choice
from envs.maze_layout import generate_walls, lattice
from envs.scene import COLOUR_NAMES, FLOOR, OBJECT, WALL, Scene
from envs.single import GridEnv
from envs.vector import GridVectorEnv

FORWARD, TURN_LEFT, TURN_RIGHT = 0, 1, 2
TURN = np.array([0, -1, 1])  # heading change per turn action
MOVES = np.array([1, 0, 0])  # cells moved along the heading, per action

# Cell codes in `cells` and in the observation.
CELL_FLOOR, CELL_WALL, CELL_OBJECT = 0, 1, 2  # CELL_OBJECT + c: object of colour c


class MazeRules(BatchedRules):
    """A batch of mazes with turn actions.

    State: cells (N, size*size) with the cell codes above (walls and objects), position (N,)
    flat, heading (N,), target colour (N,), targets reached (N,), and the episode's key, from
    which each new target colour is drawn.
    """

    rotate_view = True
    num_actions = 3

    def __init__(self, num_envs: int, size: int = 9, num_objects: int = 8, max_episode_steps: int = 200):
        super().__init__(num_envs, max_episode_steps)
        self.size = check_int("size", size, 5)
        if size % 2 == 0:
            raise ValueError(f"size must be odd (rooms sit at odd rows and columns), got {size}")
        min_floor = 2 * lattice(size).num_rooms - 1  # rooms + the walls of a spanning tree
        self.num_objects = check_int("num_objects", num_objects, 2, min(len(COLOUR_NAMES), min_floor - 1))
        cells = size * size
        self.single_observation_space = spaces.MultiDiscrete(
            [CELL_OBJECT + self.num_objects] * 9 + [self.num_objects], dtype=np.int64
        )
        self.single_action_space = spaces.Discrete(self.num_actions)
        self._layout_uniforms = lattice(size).uniforms_needed
        # layout, placement keys per cell, heading, first target, episode key
        self.uniforms_per_reset = self._layout_uniforms + cells + 3

        n = self.num_envs
        self.cells = np.zeros((n, cells), dtype=np.int64)
        self.position = np.zeros(n, dtype=np.int64)
        self.heading = np.zeros(n, dtype=np.int64)
        self.target = np.zeros(n, dtype=np.int64)
        self.targets_reached = np.zeros(n, dtype=np.int64)
        self.key = np.zeros(n, dtype=np.uint64)

        self._row_start = np.arange(n) * cells  # (N,) flat offset of each env's cells
        self._deltas = grid.flat_deltas(size)
        self._view = grid.view_offsets(size, rotate=self.rotate_view)

    def state_bounds(self) -> dict[str, tuple[int, int]]:
        cells = self.size * self.size
        return {**super().state_bounds(), "cells": (CELL_FLOOR, CELL_OBJECT + self.num_objects - 1), "position": (0, cells - 1),
                "heading": (0, 3), "target": (0, self.num_objects - 1), "targets_reached": (0, np.iinfo(np.int64).max)}

    def _new_episodes(self, idx: np.ndarray, u: np.ndarray) -> None:
        cells = self.size * self.size
        walls = generate_walls(self.size, u[:, : self._layout_uniforms])  # (K, cells)
        keys = u[:, self._layout_uniforms : self._layout_uniforms + cells]
        rest = u[:, self._layout_uniforms + cells :]  # heading, first target, episode key

        placed = grid.random_free_cells(~walls, keys, self.num_objects + 1)  # (K, objects + 1)
        layout = walls.astype(np.int64)  # CELL_WALL where walls, CELL_FLOOR elsewhere
        rows = np.arange(len(idx))[:, None]
        layout[rows, placed[:, : self.num_objects]] = CELL_OBJECT + np.arange(self.num_objects)
        self.cells[idx] = layout
        self.position[idx] = placed[:, self.num_objects]
        self.heading[idx] = np.floor(rest[:, 0] * 4).astype(np.int64)
        self.target[idx] = np.floor(rest[:, 1] * self.num_objects).astype(np.int64)
        self.key[idx] = episode_key(rest[:, 2])
        self.targets_reached[idx] = 0

    def _move(self, actions: np.ndarray) -> None:
        """Turn, or step forward unless a wall is ahead."""
        self.heading = (self.heading + TURN[actions]) % 4
        ahead = self.position + self._deltas[self.heading] * MOVES[actions]
        blocked = self.cells.take(self._row_start + ahead) == CELL_WALL
        self.position = np.where(blocked, self.position, ahead)

    def _act(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self._move(actions)
        reached = self.cells.take(self._row_start + self.position) == CELL_OBJECT + self.target
        if reached.any():
            hit = np.flatnonzero(reached)
            # the new target is one of the other colours: an offset of 1 .. num_objects - 1
            offset = 1 + event_choice(self.key[hit], self.targets_reached[hit], self.num_objects - 1)
            self.target[hit] = (self.target[hit] + offset) % self.num_objects
            self.targets_reached[hit] += 1
        return reached.astype(np.float64), np.zeros(self.num_envs, dtype=bool)

    def observe(self) -> np.ndarray:
        obs = np.empty((self.num_envs, 10), dtype=np.int64)
        view = (self._row_start + self.position)[:, None] + self._view[self.heading]  # (N, 9)
        obs[:, :9] = self.cells.take(view)
        obs[:, 9] = self.target
        return obs

    def info(self) -> dict[str, np.ndarray]:
        return {"targets_reached": self.targets_reached.copy()}

    def hidden_state(self, i: int) -> dict[str, Any]:
        layout = self.cells[i].reshape(self.size, self.size)
        object_cells = [int(np.argmax(self.cells[i] == CELL_OBJECT + c)) for c in range(self.num_objects)]
        return {
            "walls": layout == CELL_WALL,  # (size, size) bool
            "position": divmod(int(self.position[i]), self.size),  # (row, col)
            "heading": int(self.heading[i]),
            "objects": [divmod(cell, self.size) for cell in object_cells],  # (row, col) of colour c
            "target": int(self.target[i]),
            "targets_reached": int(self.targets_reached[i]),
        }

    def scene(self, i: int) -> Scene:
        layout = self.cells[i].reshape(self.size, self.size)
        tiles = np.where(layout == CELL_WALL, WALL, FLOOR)
        tiles = np.where(layout >= CELL_OBJECT, OBJECT + layout - CELL_OBJECT, tiles)
        agent = divmod(int(self.position[i]), self.size)
        view = [divmod(int(c), self.size) for c in self.position[i] + self._view[self.heading[i]]]
        heading = int(self.heading[i]) if self.rotate_view else None
        caption = f"step {self.elapsed[i]}/{self.max_episode_steps}  targets {self.targets_reached[i]}"
        return Scene(tiles, agent, heading, view, int(self.target[i]), caption)


class MazeEasyRules(MazeRules):
    """The same mazes without a heading: four cardinal moves, the view with north up."""

    rotate_view = False
    num_actions = 4

    def _move(self, actions: np.ndarray) -> None:
        ahead = self.position + self._deltas[actions]
        blocked = self.cells.take(self._row_start + ahead) == CELL_WALL
        self.position = np.where(blocked, self.position, ahead)


class MazeEnv(GridEnv):
    __doc__ = __doc__
    rules_class = MazeRules
    key_actions = {"up": FORWARD, "left": TURN_LEFT, "right": TURN_RIGHT}


class MazeVectorEnv(GridVectorEnv):
    __doc__ = __doc__
    rules_class = MazeRules


class MazeEasyEnv(GridEnv):
    __doc__ = __doc__
    rules_class = MazeEasyRules
    key_actions = {"up": grid.UP, "right": grid.RIGHT, "down": grid.DOWN, "left": grid.LEFT}


class MazeEasyVectorEnv(GridVectorEnv):
    __doc__ = __doc__
    rules_class = MazeEasyRules
