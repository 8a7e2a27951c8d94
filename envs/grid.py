"""Grid geometry shared by the mazes and the water maze.

Positions are flat indices into a row-major (height, width) grid, so moving is one addition and
reading the 3x3 area around a batch of agents is one `take`.

Headings and cardinal moves use one numbering: 0 up (north), 1 right (east), 2 down (south),
3 left (west). Turning right adds 1, turning left subtracts 1 (mod 4).
"""

from __future__ import annotations

import numpy as np

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3
DIRECTIONS = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])  # (4, 2) row and column step per heading


def flat_deltas(width: int) -> np.ndarray:
    """(4,) flat index step of one move in each heading."""
    return DIRECTIONS[:, 0] * width + DIRECTIONS[:, 1]


def view_offsets(width: int, rotate: bool) -> np.ndarray:
    """(4, 9) flat offsets of the 3x3 area around an agent, one row per heading.

    The 9 cells are listed row-major as the agent sees them. With `rotate`, the view turns with
    the agent: its first row is the row ahead, its first column is on the agent's left. Without
    it, the view is the world's (north up) for every heading.
    """
    offsets = np.empty((4, 9), dtype=np.int64)
    for heading in range(4):
        ahead = DIRECTIONS[heading] if rotate else DIRECTIONS[UP]
        right = DIRECTIONS[(heading + 1) % 4] if rotate else DIRECTIONS[RIGHT]
        for k, (r, c) in enumerate((r, c) for r in (-1, 0, 1) for c in (-1, 0, 1)):
            dr, dc = -r * ahead + c * right
            offsets[heading, k] = dr * width + dc
    return offsets


def random_free_cells(free: np.ndarray, u: np.ndarray, count: int) -> np.ndarray:
    """(K, count) distinct free cells per row, in random order.

    free: (K, C) bool, which cells may be chosen; u: (K, C) uniforms in [0, 1). Sorting the
    uniforms of the free cells gives a uniformly random ordering of them; non-free cells get
    the key 2 and sort last. The caller guarantees every row has at least `count` free cells.
    """
    keys = np.where(free, u, 2.0)
    return np.argsort(keys, axis=1, kind="stable")[:, :count]
