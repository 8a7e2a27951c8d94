"""The accuracy measures on hand-computed cases."""

import numpy as np
import pytest

from seqtasks.data import IGNORE
from seqtasks.metrics import sequence_accuracy, token_accuracy, within_tolerance

I = IGNORE


def test_token_accuracy_counts_only_tokens_with_a_target():
    targets = np.array([I, 1, 2, I, 3, 4])
    predictions = np.array([9, 1, 0, 9, 3, 4])  # wrong where ignored (no matter), one miss of four
    assert token_accuracy(predictions, targets) == 0.75


def test_sequence_accuracy_needs_every_target_of_an_episode():
    # episodes: [I, 1, 2] right, [3, I] wrong, [I, I] no target (not counted), [4] right
    targets = np.array([I, 1, 2, 3, I, I, I, 4])
    predictions = np.array([0, 1, 2, 0, 5, 5, 5, 4])
    offsets = np.array([0, 3, 5, 7, 8])
    assert sequence_accuracy(predictions, targets, offsets) == pytest.approx(2 / 3)


def test_within_tolerance_is_strict():
    targets = np.array([0.5, 0.5, 0.5, 0.25])
    predictions = np.array([0.53, 0.47, 0.55, 0.2])  # |diff| 0.03 yes, 0.03 yes, 0.05 no, 0.05 no
    assert within_tolerance(predictions, targets) == 0.5
    assert within_tolerance(np.array([0.0]), np.array([0.0399])) == 1.0


def test_undefined_accuracies_are_refused():
    with pytest.raises(ValueError, match="no token has a target"):
        token_accuracy(np.array([1]), np.array([I]))
    with pytest.raises(ValueError, match="no episode has a target"):
        sequence_accuracy(np.array([1]), np.array([I]), np.array([0, 1]))
    with pytest.raises(ValueError, match="no sequences"):
        within_tolerance(np.array([]), np.array([]))
