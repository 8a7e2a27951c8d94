"""Random walk (Feedback Transformer paper, section 7.1): track an agent's cell from its actions.

The agent starts in a fixed cell, the grid's centre (size // 2, size // 2), facing north. Each
step it picks forward, turn left or turn right uniformly at random; a forward move off the grid
is ignored. After `walk_length` actions it is reset to the start. An episode's input is the
reset symbol, then the actions; the target after each action is the agent's cell, row * size +
col (none at the reset symbol). Turns matter: the same forward moves end in different cells.

Inputs: 0 forward, 1 left, 2 right, 3 reset. Outputs: the size * size cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqtasks.data import IGNORE, Episodes

FORWARD, LEFT, RIGHT, RESET = 0, 1, 2, 3
# headings 0 north, 1 east, 2 south, 3 west: row and column change of a forward move
ROW_STEP = np.array([-1, 0, 1, 0])
COL_STEP = np.array([0, 1, 0, -1])


@dataclass(frozen=True)
class RandomWalkTask:
    size: int = 8
    walk_length: int = 100

    kind = "tokens"
    input_tokens = ("forward", "left", "right", "reset")
    finite = False

    @property
    def output_tokens(self) -> tuple[str, ...]:
        return tuple(f"{r},{c}" for r in range(self.size) for c in range(self.size))

    def generate(self, rng: np.random.Generator, count: int, split: str) -> Episodes:
        actions = rng.integers(0, 3, (count, self.walk_length))  # (E, W)
        row = np.full(count, self.size // 2)
        col = np.full(count, self.size // 2)
        heading = np.zeros(count, dtype=np.int64)
        cells = np.empty_like(actions)
        for t in range(self.walk_length):  # vectorised over episodes, sequential in time
            action = actions[:, t]
            heading = (heading + (action == RIGHT) - (action == LEFT)) % 4
            forward = action == FORWARD
            new_row, new_col = row + forward * ROW_STEP[heading], col + forward * COL_STEP[heading]
            inside = (new_row >= 0) & (new_row < self.size) & (new_col >= 0) & (new_col < self.size)
            row, col = np.where(inside, new_row, row), np.where(inside, new_col, col)
            cells[:, t] = row * self.size + col
        inputs = np.concatenate([np.full((count, 1), RESET), actions], axis=1)  # (E, W + 1)
        targets = np.concatenate([np.full((count, 1), IGNORE), cells], axis=1)
        return Episodes.from_rectangular(inputs, targets)
