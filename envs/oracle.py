"""Oracle policies: shortest paths computed from the hidden state, the upper bound an evaluation
prints beside a learned policy.

`make_oracle(env)` takes a single or vector env (any wrappers) and returns a callable that gives
the oracle's actions for every env of its batch, (N,) int64, from the current hidden state.

- Corridor: walk forward, enter the door of the cue's colour.
- Passive T-maze: walk right to the junction, step onto the goal's side (return 1, no penalty).
- Memory length: answer the queried bit at every step (only the last one counts: return 1).
- Maze (turns): a shortest path in (cell, heading) space, where forward, turn left and turn right
  each cost one step. MazeEasy: a shortest path over cells.
- Water maze: straight to the goal (the grid is open, so any monotone path is shortest).

Maze distance tables are computed for a whole batch at once (value iteration over arrays) and
kept until an env's layout changes (one table per object, so a new target costs nothing).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from envs import grid
from envs.corridor import ENTER_LOWER, ENTER_UPPER, FORWARD, CorridorRules
from envs.maze import CELL_OBJECT, CELL_WALL, TURN_LEFT, TURN_RIGHT, MazeRules
from envs.memory_length import MemoryLengthRules
from envs.tmaze import DOWN, RIGHT, UP, UP_SIDE, PassiveTMazeRules
from envs.water_maze import WaterMazeRules

UNREACHABLE = np.iinfo(np.int32).max // 2


def cell_distances(free: np.ndarray, goal: np.ndarray, width: int) -> np.ndarray:
    """(K, C) steps from each free cell to `goal` (K,) moving between free neighbours."""
    k, _ = free.shape
    dist = np.full(free.shape, UNREACHABLE, dtype=np.int64)
    dist[np.arange(k), goal] = 0
    while True:
        # a cell p can go through a free neighbour p + d; free cells are never on the border,
        # so the roll's wrap-around only ever lands on walls
        through = [np.roll(dist, -d, axis=1) + 1 for d in grid.flat_deltas(width)]
        new = np.where(free, np.minimum(dist, np.min(through, axis=0)), UNREACHABLE)
        if np.array_equal(new, dist):
            return dist
        dist = new


def turn_distances(free: np.ndarray, goal: np.ndarray, width: int) -> np.ndarray:
    """(K, C, 4) steps from each (free cell, heading) to `goal` (K,) with forward and turn actions."""
    k, _ = free.shape
    dist = np.full((*free.shape, 4), UNREACHABLE, dtype=np.int64)
    dist[np.arange(k), goal, :] = 0
    deltas = grid.flat_deltas(width)
    while True:
        forward = np.stack([np.roll(dist[:, :, h], -deltas[h], axis=1) for h in range(4)], axis=2) + 1
        turned = np.minimum(np.roll(dist, 1, axis=2), np.roll(dist, -1, axis=2)) + 1
        new = np.minimum(dist, np.minimum(forward, turned))
        new = np.where(free[:, :, None], np.minimum(new, UNREACHABLE), UNREACHABLE)
        if np.array_equal(new, dist):
            return dist
        dist = new


class MazeOracle:
    """Shortest-path actions for a batch of mazes, with or without turning."""

    def __init__(self, rules: MazeRules):
        self.rules = rules
        self._cells = np.full_like(rules.cells, -1)  # the layout each env's tables were computed for
        self._dist = None  # (N, objects, C) or (N, objects, C, 4): steps to each object

    def _refresh(self) -> None:
        """Recompute the distance tables to every object for envs whose layout changed."""
        r = self.rules
        stale = np.flatnonzero(np.any(self._cells != r.cells, axis=1))
        if len(stale) == 0:
            return
        cells = np.repeat(r.cells[stale], r.num_objects, axis=0)  # (K * objects, C)
        colour = np.tile(np.arange(r.num_objects), len(stale))
        goal = np.argmax(cells == (CELL_OBJECT + colour)[:, None], axis=1)
        compute = turn_distances if r.rotate_view else cell_distances
        dist = compute(cells != CELL_WALL, goal, r.size)
        dist = dist.reshape(len(stale), r.num_objects, *dist.shape[1:])
        if self._dist is None:
            self._dist = np.zeros((r.num_envs, *dist.shape[1:]), dtype=np.int64)
        self._dist[stale] = dist
        self._cells[stale] = r.cells[stale]

    def steps_to_target(self) -> np.ndarray:
        """(N,) the fewest steps from each env's current cell (and heading) to its target."""
        self._refresh()
        r = self.rules
        dist = self._dist[np.arange(r.num_envs), r.target]  # (N, C) or (N, C, 4)
        return dist[np.arange(r.num_envs), r.position] if not r.rotate_view else dist[np.arange(r.num_envs), r.position, r.heading]

    def __call__(self) -> np.ndarray:
        self._refresh()
        r = self.rules
        dist = self._dist[np.arange(r.num_envs), r.target]  # (N, C) or (N, C, 4): to the target
        envs = np.arange(r.num_envs)
        deltas = grid.flat_deltas(r.size)
        if not r.rotate_view:
            # the first cardinal move that gets one step closer
            here = dist[envs, r.position]
            there = dist[envs[:, None], r.position[:, None] + deltas[None, :]]  # (N, 4)
            return np.argmax(there == (here - 1)[:, None], axis=1)
        here = dist[envs, r.position, r.heading]
        ahead = dist[envs, r.position + deltas[r.heading], r.heading]
        left = dist[envs, r.position, (r.heading - 1) % 4]
        return np.where(ahead == here - 1, FORWARD, np.where(left == here - 1, TURN_LEFT, TURN_RIGHT))


def corridor_oracle(rules: CorridorRules) -> Callable[[], np.ndarray]:
    def act() -> np.ndarray:
        door = np.where(rules.upper == rules.cue, ENTER_UPPER, ENTER_LOWER)
        return np.where(rules.position < rules.length - 1, FORWARD, door)

    return act


def tmaze_oracle(rules: PassiveTMazeRules) -> Callable[[], np.ndarray]:
    def act() -> np.ndarray:
        return np.where(rules.x < rules.length, RIGHT, np.where(rules.goal == UP_SIDE, UP, DOWN))

    return act


def water_maze_oracle(rules: WaterMazeRules) -> Callable[[], np.ndarray]:
    def act() -> np.ndarray:
        vertical = np.where(rules.goal_row < rules.row, grid.UP, grid.DOWN)
        horizontal = np.where(rules.goal_col > rules.col, grid.RIGHT, grid.LEFT)
        return np.where(rules.goal_row != rules.row, vertical, horizontal)

    return act


def make_oracle(env) -> Callable[[], np.ndarray]:
    """The oracle for a single or vector env of this package: call it for (N,) actions."""
    rules = env.unwrapped.rules
    if isinstance(rules, MazeRules):
        return MazeOracle(rules)
    if isinstance(rules, CorridorRules):
        return corridor_oracle(rules)
    if isinstance(rules, PassiveTMazeRules):
        return tmaze_oracle(rules)
    if isinstance(rules, WaterMazeRules):
        return water_maze_oracle(rules)
    if isinstance(rules, MemoryLengthRules):
        return rules.answer
    raise ValueError(f"no oracle for {type(rules).__name__}; oracles exist for the corridor, mazes, T-maze, water maze and memory length")
