"""The long-term memory problems: adding, multiplication (Hochreiter & Schmidhuber) and XOR
(Martens & Sutskever), as set up by Raffel & Ellis.

A sequence of length L has two channels: a value, and a marker that is -1 at the first and
last step, 1 at two steps and 0 elsewhere. The first marked step is uniform in 1 .. 9 (one of
the first ten steps, not the first), the second uniform over 1 .. L // 2 - 1 without the first
(before the midpoint). The target combines the two marked values:
  adding          values uniform in [-1, 1], target 0.5 + (a + b) / 4 (Hochreiter's scaling,
                  so targets lie in [0, 1] with mean 0.5)
  multiplication  values uniform in [0, 1], target a * b
  xor             values in {0, 1}, target a xor b
A prediction is correct when |prediction - target| < 0.04. Lengths are `length` (fixed) or,
with `variable_length`, uniform in length .. ceil(1.1 * length) (Raffel & Ellis's setting).
The training length is also the test length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seqtasks.data import Sequences, offsets_from_lengths

PROBLEMS = ("adding", "multiplication", "xor")
MIN_LENGTH = 6  # room for two distinct marked steps before the midpoint
MEAN_TARGET = {"adding": 0.5, "multiplication": 0.25, "xor": 0.5}


@dataclass(frozen=True)
class LongTermTask:
    problem: str = "adding"
    length: int = 100
    variable_length: bool = False

    kind = "sequences"
    finite = False

    def __post_init__(self):
        if self.problem not in PROBLEMS:
            raise ValueError(f"unknown long-term problem {self.problem!r}; choose from {list(PROBLEMS)}")
        if self.length < MIN_LENGTH:
            raise ValueError(f"seq_length must be >= {MIN_LENGTH} (two marked steps before the midpoint), got {self.length}")

    @property
    def mean_target(self) -> float:
        return MEAN_TARGET[self.problem]

    def generate(self, rng: np.random.Generator, count: int, split: str) -> Sequences:
        longest = math.ceil(1.1 * self.length) if self.variable_length else self.length
        lengths = rng.integers(self.length, longest + 1, count)  # (E,)
        offsets = offsets_from_lengths(lengths)
        starts = offsets[:-1]
        total = int(offsets[-1])
        if self.problem == "adding":
            values = rng.uniform(-1.0, 1.0, total)
        elif self.problem == "multiplication":
            values = rng.uniform(0.0, 1.0, total)
        else:
            values = rng.integers(0, 2, total).astype(np.float64)
        before_middle = lengths // 2  # marked steps lie in 1 .. before_middle - 1
        first = rng.integers(1, np.minimum(10, before_middle))  # (E,)
        second = rng.integers(1, before_middle - 1)
        second = second + (second >= first)  # uniform over 1 .. before_middle - 1 without `first`
        marker = np.zeros(total)
        marker[starts] = marker[offsets[1:] - 1] = -1.0
        marker[starts + first] = marker[starts + second] = 1.0
        a, b = values[starts + first], values[starts + second]
        if self.problem == "adding":
            targets = 0.5 + (a + b) / 4.0
        elif self.problem == "multiplication":
            targets = a * b
        else:
            targets = np.logical_xor(a > 0.5, b > 0.5).astype(np.float64)
        inputs = np.stack([values, marker], axis=1).astype(np.float32)  # (N, 2)
        return Sequences(inputs, targets.astype(np.float32), offsets)
