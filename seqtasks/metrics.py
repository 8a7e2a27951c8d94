"""Accuracy measures of the toy tasks, on numpy arrays.

Letters: N tokens, E episodes, K sequences.
"""

from __future__ import annotations

import numpy as np

from seqtasks.data import IGNORE, episode_index

TOLERANCE = 0.04  # the long-term problems: a prediction within this of its target is correct


def token_accuracy(predictions: np.ndarray, targets: np.ndarray) -> float:
    """Fraction of the tokens with a target (targets != IGNORE) predicted right; (N,) each."""
    scored = targets != IGNORE
    if not scored.any():
        raise ValueError("no token has a target: accuracy is undefined")
    return float((predictions[scored] == targets[scored]).mean())


def sequence_accuracy(predictions: np.ndarray, targets: np.ndarray, offsets: np.ndarray) -> float:
    """Fraction of the episodes with a target whose every target token is predicted right.
    predictions, targets: (N,); offsets: (E + 1,)."""
    episode = episode_index(offsets)
    scored = targets != IGNORE
    wrong = np.bincount(episode[scored], weights=predictions[scored] != targets[scored], minlength=len(offsets) - 1)
    has_target = np.bincount(episode[scored], minlength=len(offsets) - 1) > 0
    if not has_target.any():
        raise ValueError("no episode has a target: sequence accuracy is undefined")
    return float((wrong[has_target] == 0).mean())


def within_tolerance(predictions: np.ndarray, targets: np.ndarray, tolerance: float = TOLERANCE) -> float:
    """Fraction of the (K,) predictions with |prediction - target| < tolerance."""
    if len(targets) == 0:
        raise ValueError("no sequences: accuracy is undefined")
    return float((np.abs(predictions - targets) < tolerance).mean())
