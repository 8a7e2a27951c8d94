"""Checkpoints written atomically and read back with clear errors.

A checkpoint is one `torch.save`d dict with a `kind` (which trainer wrote it) and a
`format` version. Writing goes to a temporary file in the same folder, is flushed to disk, then
renamed over the old one: a crash at any moment leaves either the previous checkpoint or the new
one, never a torn file. Ctrl-C is held back until the write is done, so pressing it while a run
saves (as it does on its way out) still leaves the new checkpoint, and no temporary file. Both
trainers (train_a2c.py and seqtasks) use this module.
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch

from agents.interrupt import held_interrupt

FORMAT = 1
FILE_NAME = "checkpoint.pt"


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable, or written by something else."""


def checkpoint_path(run_dir_or_file: str | os.PathLike) -> Path:
    """The checkpoint file of a run folder, or the given file itself."""
    path = Path(run_dir_or_file)
    return path / FILE_NAME if path.is_dir() else path


def run_checkpoint(run_dir: str | os.PathLike) -> Path:
    """The checkpoint file a trainer writes in its run folder, whether the folder exists or not
    (checkpoint_path would take a folder removed under a running trainer for a file's path)."""
    return Path(run_dir) / FILE_NAME


def save_checkpoint(path: str | os.PathLike, kind: str, payload: dict[str, Any]) -> Path:
    """Write `payload` to `path` atomically, tagged with `kind`; returns the path."""
    path = Path(path)
    if not path.parent.is_dir():
        print(f"note: {path.parent} is missing (removed while the run went on?); writing the checkpoint into a new one", file=sys.stderr)
    path.parent.mkdir(parents=True, exist_ok=True)
    with held_interrupt():
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as file:
                torch.save({"kind": kind, "format": FORMAT, **payload}, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return path


def load_checkpoint(run_dir_or_file: str | os.PathLike, kind: str | tuple[str, ...], map_location: Any = "cpu") -> dict[str, Any]:
    """Read the checkpoint of `run_dir_or_file`, checking it was written by trainer `kind` (or
    one of several)."""
    path = checkpoint_path(run_dir_or_file)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {str(path)!r} (give a run folder holding {FILE_NAME} or the file itself)")
    try:
        # Checkpoints hold numpy random states and config dicts besides tensors, so the full
        # unpickler is needed; only load checkpoints you trust, as with any torch.load.
        payload = torch.load(path, map_location=map_location, weights_only=False)
    except (pickle.UnpicklingError, zipfile.BadZipFile, EOFError, RuntimeError, OSError, ValueError) as error:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or not a checkpoint: {error}") from error
    if not isinstance(payload, dict) or "kind" not in payload:
        raise CheckpointError(f"{str(path)!r} is not a feedback-rl checkpoint")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if payload["kind"] not in kinds:
        expected = " or ".join(repr(k) for k in kinds)
        raise CheckpointError(f"{str(path)!r} is a {payload['kind']!r} checkpoint, expected {expected}")
    if payload.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} has checkpoint format {payload.get('format')!r}; this version reads {FORMAT}")
    return payload
