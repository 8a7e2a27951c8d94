"""Copy and reverse (Kaiser & Sutskever): read digits, then write them back in order or reversed.

An episode of length L: the L digits, the separator '=', then L queries '?'; at the k-th query
the target is the k-th digit (copy) or the k-th from the end (reverse). The queries carry no
information, so each output must come from memory, not from the previous target (no teacher
forcing). Train and validation use `length` digits, test `test_length` (the paper: 40 and 400).

Inputs: 0-9 digits, 10 '=', 11 '?'. Outputs: 0-9.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqtasks.data import IGNORE, Episodes

SEPARATOR, QUERY = 10, 11


@dataclass(frozen=True)
class CopyTask:
    length: int = 40
    test_length: int = 400
    reverse: bool = False

    kind = "tokens"
    input_tokens = tuple(str(d) for d in range(10)) + ("=", "?")
    output_tokens = tuple(str(d) for d in range(10))
    finite = False

    def generate(self, rng: np.random.Generator, count: int, split: str) -> Episodes:
        length = self.test_length if split == "test" else self.length
        digits = rng.integers(0, 10, (count, length))  # (E, L)
        shown = digits[:, ::-1] if self.reverse else digits
        inputs = np.concatenate([digits, np.full((count, 1), SEPARATOR), np.full((count, length), QUERY)], axis=1)  # (E, 2L + 1)
        targets = np.concatenate([np.full((count, length + 1), IGNORE), shown], axis=1)
        return Episodes.from_rectangular(inputs, targets)
