"""The replay buffer: a ring of C sequences of M steps (agents/learners/dqn/sequences.py), numpy arrays.

C is the capacity in transitions over M (a slot holds one sequence, its padding included), or
`max_sequences` where that is fewer. Its memory is known before anything is allocated
(`replay_bytes`), and `ReplayBuffer` checks it against the memory available (a TooLarge naming
the estimate and the flag to lower). Sampling draws C indices uniformly with replacement from
torch's global generator (saved with the run, so a resumed run draws the same batches).

Saving writes every array to one .npz (np.savez: arrays only, read back with allow_pickle=False,
so loading runs nothing) through durable/records.py:atomic_file. A run alternates between two
files, FILES, and its checkpoint names the one it goes with: the file a checkpoint names is never
the one being written, so a process killed at any moment leaves a checkpoint and its replay whole.

Letters: C slots, M steps, K sequences in a batch, N flat observation columns.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.runtime.memory_budget import check_fits, gib
from durable.records import atomic_file
from agents.learners.dqn.sequences import empty_steps

FILES = ("replay-a.npz", "replay-b.npz")
NPY_HEADER = 4096  # generous room for an .npy entry's header beside its data


class ReplayError(ValueError):
    """A replay file that does not fit this run: missing, of other shapes, or not arrays."""


def replay_slots(capacity: int, length: int, max_sequences: int, batch_size: int) -> int:
    """C: the sequences the buffer holds; a ValueError where it cannot hold one batch."""
    slots = capacity // length
    if max_sequences:
        slots = min(slots, max_sequences)
    if slots < batch_size:
        raise ValueError(f"the replay holds {slots} sequences of {length} steps (--replay-capacity {capacity:,} transitions"
                         f"{f', --replay-sequences {max_sequences}' if max_sequences else ''}), fewer than one batch "
                         f"(--batch-size {batch_size}); raise --replay-capacity to at least {batch_size * length:,}")
    return slots


def replay_bytes(slots: int, length: int, obs_columns: int, dtypes: dict[str, np.dtype], state_shapes: dict[str, tuple]) -> int:
    """The bytes of a buffer of `slots` sequences: every step's fields and each sequence's start state."""
    step = sum(np.dtype(dtype).itemsize * (obs_columns if name == "obs" else 1) for name, dtype in dtypes.items())
    state = sum(4 * int(np.prod(shape)) for shape in state_shapes.values())
    return slots * (length * step + state)


class ReplayBuffer:
    """C sequences of M steps: each field (C, M, ...) and "state.NAME" (C, ...) where segments keep one."""

    def __init__(self, slots: int, length: int, obs_columns: int, dtypes: dict[str, np.dtype],
                 state_shapes: dict[str, tuple], what: str):
        size = replay_bytes(slots, length, obs_columns, dtypes, state_shapes)
        check_fits(f"the replay ({what}: {slots:,} sequences of {length} steps, {gib(size)})", size,
                   "lower --replay-capacity or --replay-sequences")
        self.slots, self.length = slots, length
        self.arrays = empty_steps((slots, length), obs_columns, dtypes)
        self.arrays.update({name: np.zeros((slots, *shape), dtype=np.float32) for name, shape in state_shapes.items()})
        self.size = 0  # sequences held
        self.added = 0  # sequences ever added (the next goes to slot added % C)

    def __len__(self) -> int:
        return self.size

    @property
    def transitions(self) -> int:
        """Valid steps held (the final observations and the padding not counted)."""
        return int(self.arrays["valid"][: self.size].sum())

    def add(self, sequences: dict[str, np.ndarray]) -> None:
        """Store E sequences ((E, M, ...) each field, (E, ...) each start state), oldest first out."""
        count = len(sequences["first"])
        slots = (self.added + np.arange(count)) % self.slots
        for name, values in self.arrays.items():
            values[slots] = sequences[name]
        self.added += count
        self.size = min(self.slots, self.size + count)

    def sample(self, count: int) -> dict[str, np.ndarray]:
        """`count` sequences drawn uniformly with replacement: (K, M, ...) each field."""
        if self.size == 0:
            raise ValueError("the replay is empty: nothing to sample")
        index = torch.randint(self.size, (count,)).numpy()
        return {name: values[index] for name, values in self.arrays.items()}

    # ------------------------------------------------------------ saving

    def save(self, path: Path, extra: dict[str, np.ndarray]) -> None:
        """Write the held sequences, the counters and `extra` arrays (the cutter's pending steps) to
        `path` atomically."""
        arrays = {f"replay.{name}": values[: self.size] for name, values in self.arrays.items()}
        arrays["replay.counters"] = np.array([self.size, self.added], dtype=np.int64)
        with atomic_file(path) as file:
            np.savez(file, **arrays, **extra)

    def load(self, path: Path, extra: dict[str, np.ndarray], varying: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        """Read what save() wrote into this buffer; `extra` gives the names, dtypes and shapes of the
        other arrays expected (those in `varying` of any length), and every array but the buffer's
        is returned. ReplayError for a file that does not fit."""
        expected = {f"replay.{name}": values for name, values in self.arrays.items()}
        loaded = read_arrays(path, {**{"replay.counters": np.zeros(2, np.int64)}, **expected, **extra},
                             rows={**expected, **{name: extra[name] for name in varying}})
        size, added = (int(value) for value in loaded["replay.counters"])
        if not (0 <= size <= self.slots and size <= added and (size == self.slots or size == added)):
            raise ReplayError(f"{path} holds {size} sequences of {added} added, which a buffer of {self.slots} cannot")
        for name, values in self.arrays.items():
            stored = loaded[f"replay.{name}"]
            if stored.shape != (size, *values.shape[1:]):
                raise ReplayError(f"{path}'s {name} has shape {stored.shape}, expected {(size, *values.shape[1:])}")
            values[:size] = stored
            values[size:] = 0
        self.size, self.added = size, added
        return {name: values for name, values in loaded.items() if not name.startswith("replay.")}


def read_arrays(path: Path, expected: dict[str, np.ndarray], rows: dict[str, np.ndarray]) -> dict[str, Any]:
    """The arrays of an .npz written by ReplayBuffer.save, each checked before it is read: a stored
    (uncompressed) entry no larger than the array expected under its name (`rows`: any number of
    rows up to the buffer's), with that dtype; names not expected are refused. Pending arrays
    whose count varies ("pending.N.*") are checked against the dtype only, and their size bound
    by the file's."""
    if not path.is_file():
        raise ReplayError(f"the checkpoint's replay {str(path)!r} is missing; it is written beside checkpoint.pt and goes with it")
    try:
        with zipfile.ZipFile(path) as archive:
            entries = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
    except (zipfile.BadZipFile, OSError) as error:
        raise ReplayError(f"replay {str(path)!r} is corrupt or not an .npz: {error}") from None
    for name, info in entries.items():
        if info.compress_type != zipfile.ZIP_STORED:
            raise ReplayError(f"replay {str(path)!r}: entry {name!r} is compressed; np.savez stores arrays uncompressed")
        known = expected.get(name)
        if known is None and not name.startswith("pending."):
            raise ReplayError(f"replay {str(path)!r} holds {name!r}, which this run's replay does not have")
        if known is not None and info.file_size > known.nbytes + NPY_HEADER:
            raise ReplayError(f"replay {str(path)!r}: entry {name!r} holds {info.file_size:,} bytes, more than its "
                              f"{known.nbytes:,} in this run")
    missing = sorted(set(expected) - set(entries))
    if missing:
        raise ReplayError(f"replay {str(path)!r} lacks {', '.join(missing)}")
    try:
        with np.load(path, allow_pickle=False) as data:
            loaded = {name: data[name] for name in data.files}
    except (ValueError, OSError, zipfile.BadZipFile) as error:
        raise ReplayError(f"replay {str(path)!r} cannot be read as arrays: {error}") from None
    for name, known in expected.items():
        if loaded[name].dtype != known.dtype:
            raise ReplayError(f"replay {str(path)!r}: {name} is {loaded[name].dtype}, expected {known.dtype}")
        if name not in rows and loaded[name].shape != known.shape:
            raise ReplayError(f"replay {str(path)!r}: {name} has shape {loaded[name].shape}, expected {known.shape}")
    return loaded
