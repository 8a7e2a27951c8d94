"""Datasets of the toy tasks: token episodes and real-valued sequences, each a flat array plus offsets.

Episode i of a set is rows offsets[i] .. offsets[i + 1] of its flat arrays, so sets of varying
episode lengths need no padding, concatenating them into a training stream is free, and a split
can be checked for overlap with another by hashing each episode's inputs.

Letters: N tokens (or steps) in all, E episodes, C input channels of a real-valued sequence.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

IGNORE = -1  # target of a token with nothing to predict


def offsets_from_lengths(lengths: np.ndarray) -> np.ndarray:
    """(E,) episode lengths -> (E + 1,) offsets, starting at 0."""
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def episode_index(offsets: np.ndarray) -> np.ndarray:
    """(N,) which episode each row belongs to."""
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))


def _select_rows(offsets: np.ndarray, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of episodes `chosen` (in that order) and the offsets of the selection."""
    lengths = np.diff(offsets)[chosen]
    new_offsets = offsets_from_lengths(lengths)
    starts = offsets[:-1][chosen]
    rows = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
    return rows, new_offsets


def _hashes(flat: np.ndarray, offsets: np.ndarray) -> list[bytes]:
    return [hashlib.blake2b(flat[a:b].tobytes(), digest_size=16).digest() for a, b in zip(offsets[:-1], offsets[1:])]


@dataclass
class Episodes:
    """Token episodes of a stream task; a target at every input token, IGNORE where none."""

    inputs: np.ndarray  # (N,) int64 input tokens
    targets: np.ndarray  # (N,) int64 output tokens, IGNORE where nothing is predicted
    offsets: np.ndarray  # (E + 1,) int64

    @classmethod
    def from_rectangular(cls, inputs: np.ndarray, targets: np.ndarray) -> Episodes:
        """Episodes of one length from (E, L) arrays."""
        count, length = inputs.shape
        return cls(inputs.reshape(-1).astype(np.int64), targets.reshape(-1).astype(np.int64), np.arange(count + 1, dtype=np.int64) * length)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def select(self, chosen: np.ndarray) -> Episodes:
        rows, offsets = _select_rows(self.offsets, chosen)
        return Episodes(self.inputs[rows], self.targets[rows], offsets)

    def hashes(self) -> list[bytes]:
        """A digest of each episode's inputs (its targets follow from them in every task)."""
        return _hashes(self.inputs, self.offsets)

    @staticmethod
    def concatenate(parts: list[Episodes]) -> Episodes:
        lengths = np.concatenate([np.diff(p.offsets) for p in parts])
        return Episodes(np.concatenate([p.inputs for p in parts]), np.concatenate([p.targets for p in parts]), offsets_from_lengths(lengths))


@dataclass
class Sequences:
    """Real-valued sequences with one target each (the long-term memory problems)."""

    inputs: np.ndarray  # (N, C) float32
    targets: np.ndarray  # (E,) float32
    offsets: np.ndarray  # (E + 1,) int64

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def select(self, chosen: np.ndarray) -> Sequences:
        rows, offsets = _select_rows(self.offsets, chosen)
        return Sequences(self.inputs[rows], self.targets[chosen], offsets)

    def hashes(self) -> list[bytes]:
        return _hashes(self.inputs, self.offsets)

    @staticmethod
    def concatenate(parts: list[Sequences]) -> Sequences:
        lengths = np.concatenate([np.diff(p.offsets) for p in parts])
        return Sequences(np.concatenate([p.inputs for p in parts]), np.concatenate([p.targets for p in parts]), offsets_from_lengths(lengths))

    def padded(self, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sequences `chosen` left-padded with zeros to the longest: (K, L, C) inputs and (K,)
        lengths. Left padding ends every sequence at the last step, where its prediction is made."""
        lengths = np.diff(self.offsets)[chosen]
        longest = int(lengths.max())
        out = np.zeros((len(chosen), longest, self.inputs.shape[1]), dtype=np.float32)
        for row, (episode, length) in enumerate(zip(chosen, lengths)):
            start = self.offsets[episode]
            out[row, longest - length :] = self.inputs[start : start + length]
        return out, lengths
