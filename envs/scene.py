"""What a renderer draws: one env of a batch as a grid of tiles, the agent and its view.

Every environment turns its hidden state into a `Scene` (`BatchedRules.scene(i)`), so one
renderer (`render.py`) draws them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RENDER_MODES = ["human", "rgb_array"]

# A corridor of more cells than this is drawn shortened to this many columns (corridor_column).
MAX_CORRIDOR_COLUMNS = 32

# The colours objects, cues, doors and targets can have, by index. The corridor's cue is blue or green.
COLOUR_NAMES = ("red", "green", "blue", "yellow", "magenta", "cyan", "orange", "purple")
RED, GREEN, BLUE = 0, 1, 2

# Tile codes in Scene.tiles.
FLOOR = 0
WALL = 1
GOAL = 2  # the water maze's hidden goal, drawn for the viewer only
OBJECT = 3  # OBJECT + colour: an object of that colour (3 .. 10)
DOOR = OBJECT + len(COLOUR_NAMES)  # DOOR + colour: a door of that colour (11 .. 18)
NUM_TILES = DOOR + len(COLOUR_NAMES)


@dataclass
class Scene:
    """One env's state as the viewer sees it."""

    tiles: np.ndarray  # (H, W) int tile codes above
    agent: tuple[int, int]  # (row, col)
    heading: int | None  # grid.py heading (0 up, 1 right, 2 down, 3 left); None: no orientation
    view: list[tuple[int, int]]  # (row, col) cells the agent observes, highlighted
    target: int | None  # colour index the agent is asked to reach, None when there is none
    caption: str  # a short status line, e.g. "step 12/200  return 3"


def corridor_column(position: int, cells: int) -> int:
    """The column, from 0, at which cell `position` of a corridor of `cells` cells (>= 2) is drawn.

    Each cell has its own column up to MAX_CORRIDOR_COLUMNS cells. A longer corridor (whose cells
    all look the same) is drawn shortened to that many columns, its first and last cells at the
    ends, so that a corridor of 1,000 cells still makes a frame about 1,000 pixels wide.
    """
    columns = min(cells, MAX_CORRIDOR_COLUMNS)
    return int(position) * (columns - 1) // (cells - 1)
