"""Batched maze generation: Kruskal's algorithm, then every dead end opened (Fan et al., 7.2).

A maze of `size` x `size` blocks (size odd) has rooms at the odd (row, col) positions, a
lattice of R x R rooms with R = (size - 1) / 2. Between two neighbouring rooms is one wall
block; the blocks at even (row, col) and the border always stay walls. Kruskal's algorithm
visits the walls between rooms in random order and removes each one that joins two rooms not
yet connected, giving a spanning tree. A room left with a single opening is a dead end: one of
its other walls that is not on the border is removed, chosen at random. As rooms only gain
openings, no dead end remains, and no floor block is a dead end (a removed wall has rooms on
both sides). Everything runs over a batch of K mazes at once.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


class Lattice:
    """The rooms and inner walls of a size x size maze, as flat indices."""

    def __init__(self, size: int):
        rooms_per_side = (size - 1) // 2
        self.size = size
        self.num_rooms = rooms_per_side**2
        room_rc = [(2 * r + 1, 2 * c + 1) for r in range(rooms_per_side) for c in range(rooms_per_side)]
        self.room_cell = np.array([r * size + c for r, c in room_rc])  # (R*R,) flat block index

        ends, wall_cell = [], []  # per inner wall: the two rooms it separates, its block
        for a, (r, c) in enumerate(room_rc):
            for dr, dc in ((0, 2), (2, 0)):
                if r + dr < size - 1 and c + dc < size - 1:
                    b = room_rc.index((r + dr, c + dc))
                    ends.append((a, b))
                    wall_cell.append((r + dr // 2) * size + c + dc // 2)
        self.wall_ends = np.array(ends)  # (E, 2) rooms on either side
        self.wall_cell = np.array(wall_cell)  # (E,) flat block index
        self.num_walls = len(ends)

        # (R*R, 4) the inner walls around each room, -1 where the room touches the border
        self.room_walls = np.full((self.num_rooms, 4), -1)
        for e, (a, b) in enumerate(ends):
            self.room_walls[a, np.argmax(self.room_walls[a] < 0)] = e
            self.room_walls[b, np.argmax(self.room_walls[b] < 0)] = e

    @property
    def uniforms_needed(self) -> int:
        """Uniforms per maze: one per inner wall (Kruskal order), one per room (dead ends)."""
        return self.num_walls + self.num_rooms


@lru_cache(maxsize=None)
def lattice(size: int) -> Lattice:
    return Lattice(size)


def generate_walls(size: int, u: np.ndarray) -> np.ndarray:
    """(K, size * size) bool, True where a block is a wall, for K mazes.

    u: (K, lattice(size).uniforms_needed) uniforms in [0, 1), all the randomness used.
    """
    lat = lattice(size)
    k = len(u)
    rows = np.arange(k)
    order = np.argsort(u[:, : lat.num_walls], axis=1, kind="stable")  # (K, E) Kruskal's wall order
    component = np.broadcast_to(np.arange(lat.num_rooms), (k, lat.num_rooms)).copy()  # (K, R*R)
    is_open = np.zeros((k, lat.num_walls), dtype=bool)  # (K, E)
    for step in range(lat.num_walls):
        wall = order[:, step]  # (K,)
        a = component[rows, lat.wall_ends[wall, 0]]
        b = component[rows, lat.wall_ends[wall, 1]]
        joins = a != b
        is_open[rows, wall] = joins
        # merge component b into a where the wall joins two components
        component = np.where(joins[:, None] & (component == b[:, None]), a[:, None], component)

    # Dead ends: rooms with exactly one open wall. Open one of their closed inner walls at random.
    has_wall = lat.room_walls >= 0  # (R*R, 4)
    wall_open = np.where(has_wall, is_open[:, lat.room_walls], False)  # (K, R*R, 4)
    dead_end = wall_open.sum(axis=2) == 1  # (K, R*R)
    closed = has_wall & ~wall_open  # (K, R*R, 4) candidates
    pick = np.floor(u[:, lat.num_walls :] * closed.sum(axis=2)).astype(np.int64)  # (K, R*R)
    choice = np.argmax(np.cumsum(closed, axis=2) > pick[:, :, None], axis=2)  # (K, R*R) slot 0..3
    knocked = lat.room_walls[np.arange(lat.num_rooms), choice]  # (K, R*R) wall index
    kr, room = np.nonzero(dead_end)
    is_open[kr, knocked[kr, room]] = True

    walls = np.ones((k, size * size), dtype=bool)
    walls[:, lat.room_cell] = False
    walls[:, lat.wall_cell] = ~is_open
    return walls
