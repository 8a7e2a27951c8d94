"""Train, validation and test splits: reproducible from the seed, disjoint, of the asked sizes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqtasks.splits import make_splits
from seqtasks.tasks.counting import CountingTask
from seqtasks.tasks.long_term import LongTermTask
from seqtasks.tasks.random_walk import RandomWalkTask


def hashes(episodes):
    return set(episodes.hashes())


@settings(derandomize=True, deadline=None, max_examples=15)
@given(seed=st.integers(0, 2**32 - 1), walk_length=st.integers(3, 6), sizes=st.tuples(st.integers(1, 30), st.integers(1, 30), st.integers(1, 30)))
def test_splits_are_disjoint_even_where_collisions_are_likely(seed, walk_length, sizes):
    # 3**walk_length possible walks (27 .. 729): plenty of draws collide and must be replaced
    task = RandomWalkTask(3, walk_length)
    splits = make_splits(task, dict(zip(("train", "valid", "test"), sizes)), seed)
    assert [len(s) for s in splits.values()] == list(sizes)
    train, valid, test = (hashes(s) for s in splits.values())
    assert not train & valid and not train & test and not valid & test


def test_splits_are_reproducible_and_independent_of_other_sizes():
    task = LongTermTask("adding", 20)
    a = make_splits(task, {"train": 50, "valid": 10, "test": 10}, seed=3)
    b = make_splits(task, {"train": 50, "valid": 10, "test": 10}, seed=3)
    c = make_splits(task, {"train": 50, "valid": 25, "test": 10}, seed=3)
    d = make_splits(task, {"train": 50, "valid": 10, "test": 10}, seed=4)
    np.testing.assert_array_equal(a["train"].inputs, b["train"].inputs)
    np.testing.assert_array_equal(a["test"].targets, b["test"].targets)
    np.testing.assert_array_equal(a["train"].inputs, c["train"].inputs)  # a split's size does not move the others
    np.testing.assert_array_equal(a["test"].inputs, c["test"].inputs)
    assert not np.array_equal(a["train"].targets, d["train"].targets)


def test_impossible_disjoint_sizes_are_refused():
    with pytest.raises(ValueError, match="could not draw 20 valid episodes unseen in earlier splits"):
        make_splits(RandomWalkTask(2, 2), {"train": 200, "valid": 20, "test": 5}, seed=0)  # 9 walks exist


def test_counting_splits_are_independent_draws():
    # only max_count different episodes exist, so they cannot be disjoint; they still differ in order
    splits = make_splits(CountingTask(5), {"train": 40, "valid": 40, "test": 40}, seed=0)
    assert [len(s) for s in splits.values()] == [40, 40, 40]
    assert not np.array_equal(splits["train"].offsets, splits["valid"].offsets)


def test_empty_split_is_refused():
    with pytest.raises(ValueError, match="n_valid must be >= 1, got 0"):
        make_splits(RandomWalkTask(), {"train": 2, "valid": 0, "test": 1}, seed=0)
