"""Train, validation and test sets of a task, reproducible from one seed and disjoint.

Split k draws from its own generator, numpy's default_rng([seed, k]), so changing one split's
size leaves the others as they were. Splits are made in order (train, valid, test); an episode
whose inputs equal one of an earlier split's is dropped and replaced by a fresh draw from the
same generator, so no episode is in two splits. Duplicates within a split are kept: they are
part of the task's distribution. Tasks with a tiny episode space (counting) cannot have disjoint
splits; for them the splits are independent draws, as in the paper.
"""

from __future__ import annotations

import numpy as np

SPLITS = ("train", "valid", "test")
MAX_DRAWS = 20  # rounds of redrawing before giving up on finding enough new episodes


def make_splits(task, sizes: dict[str, int], seed: int) -> dict:
    """{split: episodes} of `sizes[split]` episodes each, for split in SPLITS."""
    seen: set[bytes] = set()
    splits = {}
    for k, name in enumerate(SPLITS):
        count = sizes[name]
        if count < 1:
            raise ValueError(f"n_{name} must be >= 1, got {count}")
        rng = np.random.default_rng([seed, k])
        parts, found = [], 0
        for _ in range(MAX_DRAWS):
            batch = task.generate(rng, count - found, name)
            if not task.finite:
                keep = np.array([h not in seen for h in batch.hashes()])
                batch = batch.select(np.flatnonzero(keep))
            parts.append(batch)
            found += len(batch)
            if found == count:
                break
        else:
            raise ValueError(
                f"could not draw {count} {name} episodes unseen in earlier splits ({found} found); "
                "the task's settings allow too few different episodes: make them longer or the splits smaller"
            )
        splits[name] = parts[0] if len(parts) == 1 else type(parts[0]).concatenate(parts)
        if not task.finite:
            seen.update(splits[name].hashes())
    return splits
