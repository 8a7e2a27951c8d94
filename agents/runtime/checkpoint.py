"""Checkpoints that anyone can open safely: written atomically, read without running code.

A checkpoint is one `torch.save`d dict with a `kind` (which trainer wrote it) and a `format`
version, holding tensors, numbers, strings, None and lists, tuples and dicts of those, nothing
else: numpy state travels as tensors (`arrays_to_tensors`), core states as plain dicts
(agents/cores/state.py), env states as arrays (envs/vector.py). So it is read with
`torch.load(weights_only=True)`, PyTorch's restricted unpickler, which builds those types and
refuses every other, and loading a checkpoint someone sent runs none of its code. What a file
holds beyond them (a pickled object, a format-1 checkpoint's numpy arrays) is refused with a
CheckpointError naming the file and the global it blocked. A format-1 checkpoint of one's own
can be converted once with `python -m agents.convert_checkpoint` (agents/convert_checkpoint.py),
which runs its pickle and so asks to be told the file is trusted; the refusal suggests it for
format-1 files only (their format is read from the pickle's opcodes, not by unpickling).

Nor can a checkpoint take the machine's memory: its archive is checked before loading
(agents/runtime/checkpoint_file.py: no compressed entry, the total within the memory
available), a top-level key that its kind does not write (FIELDS) is refused, and so is a tensor
that claims more elements than its stored bytes hold (a stride-0 view, which any copy would
expand).

Writing goes through durable/records.py:atomic_file (temporary file, fsync, rename, folder
fsync, stop signals held back): a crash at any moment leaves either the previous checkpoint or
the new one, never a torn file. Both trainers (agents/learners/train.py and seqtasks) use this module.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.runtime.checkpoint_file import ArchiveError, read_pickle
from durable.records import atomic_file

FORMAT = 2  # 1: pickled Python objects (numpy arrays, NamedTuples, cloudpickled envs); 2: plain data only
FILE_NAME = "checkpoint.pt"
CONVERT = "python -m agents.convert_checkpoint --i-trust-this-file"  # the one-off converter of format 1
# The top-level keys each kind writes (agents/learners/train.py: Trainer.state_dict, PPO's too;
# seqtasks/train.py: Run.save; "trace": experiments/memory_trace.py's traced trainer, its probes so
# far); any other is refused on load.
TRAINER_FIELDS = frozenset({"kind", "format", "config", "world_size", "policy", "optimizer", "counters", "recent_returns", "solve",
                            "rng", "envs", "actor", "window", "trace"})
FIELDS = {"a2c": TRAINER_FIELDS, "ppo": TRAINER_FIELDS,
          # agents/learners/dqn/trainer.py: the target network, which replay file goes with it, its counters
          "dqn": TRAINER_FIELDS | {"target", "replay", "dqn"},
          "seqtasks": frozenset({"kind", "format", "config", "core_options", "world_size", "model", "optimizer", "schedule", "best_model",
                                 "counters", "history", "regime", "rng"})}


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable, unsafe, or written by something else."""


def checkpoint_path(run_dir_or_file: str | os.PathLike) -> Path:
    """The checkpoint file of a run folder, or the given file itself."""
    path = Path(run_dir_or_file)
    return path / FILE_NAME if path.is_dir() else path


def run_checkpoint(run_dir: str | os.PathLike) -> Path:
    """The checkpoint file a trainer writes in its run folder, whether the folder exists or not
    (checkpoint_path would take a folder removed under a running trainer for a file's path)."""
    return Path(run_dir) / FILE_NAME


def existing_checkpoint(run_dir_or_file: str | os.PathLike) -> Path:
    """The checkpoint file of a run folder or the file itself; CheckpointError if there is none."""
    path = checkpoint_path(run_dir_or_file)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r} (give a run folder holding {FILE_NAME} or the file itself)")
    return path


def arrays_to_tensors(tree: Any) -> Any:
    """`tree` with every numpy array (and numpy scalar) as a tensor (a Python number), for a
    checkpoint; lists, tuples and dicts are walked. tensors_to_arrays undoes it."""
    if isinstance(tree, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(tree).copy())
    if isinstance(tree, np.generic):
        return tree.item()
    if isinstance(tree, dict):
        return {key: arrays_to_tensors(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(arrays_to_tensors(value) for value in tree)
    return tree


def tensors_to_arrays(tree: Any) -> Any:
    """`tree` with every tensor as a numpy array (on the CPU); lists, tuples and dicts are walked."""
    if isinstance(tree, torch.Tensor):
        return tree.cpu().numpy()
    if isinstance(tree, dict):
        return {key: tensors_to_arrays(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(tensors_to_arrays(value) for value in tree)
    return tree


def save_checkpoint(path: str | os.PathLike, kind: str, payload: dict[str, Any]) -> Path:
    """Write `payload` (plain data only: see the module docstring) to `path` atomically, tagged
    with `kind`; returns the path. CheckpointError where the disk refuses it (full, read-only):
    the previous checkpoint is kept whole (durable/records.py:atomic_file)."""
    path = Path(path)
    try:
        with atomic_file(path) as file:
            torch.save({"kind": kind, "format": FORMAT, **payload}, file)
    except OSError as error:
        kept = "the previous checkpoint is kept" if path.is_file() else "no checkpoint was written"
        raise CheckpointError(f"could not write the checkpoint {str(path)!r}: {error.strerror or error}; {kept}. "
                              f"Free some space (or make the folder writable) and resume the run") from None
    except RuntimeError as error:  # torch.save's writer reports a failed write as a RuntimeError
        kept = "the previous checkpoint is kept" if path.is_file() else "no checkpoint was written"
        raise CheckpointError(f"could not write the checkpoint {str(path)!r}: {first_line(error)}; {kept}. "
                              f"Free some space (or make the folder writable) and resume the run") from None
    return path


def first_line(error: BaseException) -> str:
    """The gist of torch.load's weights_only refusal (its message goes on for a page): the line
    naming the global or operand it blocked ("Trying to load unsupported GLOBAL posix.system ...")."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    gist = [line for line in lines if "unsupported global" in line.lower() or "unsupported operand" in line.lower()]
    return (gist or lines or [type(error).__name__])[0]


def oversized_tensor(tree: Any, where: str = "") -> str | None:
    """The path of the first tensor in `tree` whose elements reach beyond its stored bytes (a view
    with stride 0 or overlapping strides, which a copy would expand), or None."""
    if isinstance(tree, torch.Tensor):
        span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(tree.shape, tree.stride())) if tree.numel() else 0
        if tree.numel() > span or (tree.storage_offset() + span) * tree.element_size() > tree.untyped_storage().nbytes():
            return f"{where or 'the payload'} (shape {tuple(tree.shape)} over {tree.untyped_storage().nbytes():,} stored bytes)"
        return None
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, (list, tuple)) else ()
    for key, value in items:
        found = oversized_tensor(value, f"{where}.{key}" if where else str(key))
        if found:
            return found
    return None


def load_checkpoint(run_dir_or_file: str | os.PathLike, kind: str | tuple[str, ...], map_location: Any = "cpu") -> dict[str, Any]:
    """Read the checkpoint of `run_dir_or_file`, checking it was written by trainer `kind` (or
    one of several) in this format. Nothing in the file is run: see the module docstring."""
    path = existing_checkpoint(run_dir_or_file)
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; torn files and others are not one
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or not a checkpoint (not the zip archive torch.save writes)")
    try:
        facts = read_pickle(path)  # the archive checked, the pickle read without running it
    except ArchiveError as error:
        raise CheckpointError(f"refused {str(path)!r}: {error}") from None
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or not a checkpoint: {error}") from None
    if facts.format == 1:
        raise CheckpointError(f"{str(path)!r} is a format-1 checkpoint, whose reading could run code; "
                              f"if you wrote it yourself and trust it, convert it once with: {CONVERT} {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"refused {str(path)!r}: it holds Python objects, which loading would have to run as code ({first_line(error)}); "
            f"nothing of it was run. A checkpoint holds only tensors, numbers and strings: this file was not written by feedback-rl"
        ) from None
    except (zipfile.BadZipFile, EOFError, RuntimeError, OSError, ValueError) as error:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or not a checkpoint: {error}") from error
    if not isinstance(payload, dict) or "kind" not in payload:
        raise CheckpointError(f"{str(path)!r} is not a feedback-rl checkpoint")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if payload["kind"] not in kinds:
        expected = " or ".join(repr(k) for k in kinds)
        raise CheckpointError(f"{str(path)!r} is a {payload['kind']!r} checkpoint, expected {expected}")
    if payload.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} has checkpoint format {payload.get('format')!r}; this version reads {FORMAT}")
    unknown = sorted(str(key) for key in payload.keys() - FIELDS[payload["kind"]])
    if unknown:
        raise CheckpointError(f"refused {str(path)!r}: it holds keys a {payload['kind']} checkpoint does not have ({', '.join(unknown)}); "
                              f"allowed: {', '.join(sorted(FIELDS[payload['kind']]))}")
    oversized = oversized_tensor(payload)
    if oversized:
        raise CheckpointError(f"refused {str(path)!r}: the tensor at {oversized} claims more elements than it stores")
    return payload
