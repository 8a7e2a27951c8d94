"""Counting: read a run of n A's, then answer as many B's and then stop.

An episode: n A's, then n + 1 queries '?'; the targets at the queries are n B's, then '.'
(stop). The queries carry no information, so the model must count the A's and count down. n is
uniform in 1 .. max_count (the paper's settings: up to 50 and up to 1000).

An episode is fixed by n, so there are only max_count different ones: train, validation and
test are independent draws of the same small set and cannot be disjoint (`finite`).

Inputs: 0 'A', 1 '?'. Outputs: 0 'B', 1 '.'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqtasks.data import IGNORE, Episodes, episode_index, offsets_from_lengths

A, QUERY = 0, 1
B, STOP = 0, 1


@dataclass(frozen=True)
class CountingTask:
    max_count: int = 50

    kind = "tokens"
    input_tokens = ("A", "?")
    output_tokens = ("B", ".")
    finite = True

    def generate(self, rng: np.random.Generator, count: int, split: str) -> Episodes:
        n = rng.integers(1, self.max_count + 1, count)  # (E,)
        offsets = offsets_from_lengths(2 * n + 1)
        episode = episode_index(offsets)  # (N,)
        position = np.arange(offsets[-1]) - offsets[episode]  # (N,) index within the episode
        run = n[episode]
        inputs = np.where(position < run, A, QUERY)
        targets = np.where(position < run, IGNORE, np.where(position < 2 * run, B, STOP))
        return Episodes(inputs.astype(np.int64), targets.astype(np.int64), offsets)
