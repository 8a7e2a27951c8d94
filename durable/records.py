"""Every file a run or an experiment writes, written whole or not at all.

`atomic_file(path)` is the one way: the bytes go to a temporary file in the same folder, are
flushed to disk (fsync), the file is renamed over `path`, and the folder itself is fsynced so the
rename survives a power cut. A crash, Ctrl-C or SIGTERM at any moment leaves either the old file
or the new one, never a torn one, and no temporary file behind (stop signals are held back while
the file is written: durable/interrupt.py). Checkpoints (agents/runtime/checkpoint.py), config.json,
results, the experiments' done records and their summaries all go through it.

A process killed outright (SIGKILL, a power cut) mid-write leaves its temporary file,
`.NAME.XXXXXXXX.tmp`; whoever owns the folder next removes those of its own names with
`remove_stale_temporaries` (agents/runtime/run_folder.py does, holding the run's lock).

`read_record(path)` is its reader for JSON records: a record that is missing, cut off or not
JSON reads as None, so whoever asks "is this job done?" redoes the job instead of crashing.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator

from durable.interrupt import held_interrupt

FILE_MODE = 0o666  # before the umask, as open() makes files: a checkpoint reads like its config.json


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_folder(folder: Path) -> None:
    """Make a rename inside `folder` durable (a no-op where folders cannot be opened, as on Windows)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass  # some file systems (network mounts) refuse to fsync a folder; the rename still stands
    finally:
        os.close(handle)


@contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file to write; on leaving the block without an error it becomes `path`."""
    path = Path(path)
    if not path.parent.is_dir():
        print(f"note: {path.parent} is missing (removed while the run went on?); writing {path.name} into a new one", file=sys.stderr)
        path.parent.mkdir(parents=True, exist_ok=True)
    with held_interrupt():
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # temporary_glob
        try:
            os.chmod(temporary, FILE_MODE & ~_umask())  # mkstemp makes 0600
            with os.fdopen(handle, mode) as file:
                yield file
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        fsync_folder(path.parent)


def temporary_glob(name: str) -> str:
    """The glob of the temporary files atomic_file makes while writing a file called `name`."""
    return f".{name}.*.tmp"


def remove_stale_temporaries(folder: Path, names: tuple[str, ...]) -> list[Path]:
    """Remove the temporary files a killed writer of `names` left in `folder` (only a process
    that owns the folder, so that no writer is under way, may call this); returns them."""
    stale = sorted(path for name in names for path in folder.glob(temporary_glob(name)))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` to `path` atomically; returns the path."""
    with atomic_file(path, "w") as file:
        file.write(text)
    return Path(path)


def write_json(path: str | os.PathLike, record: Any, **dumps_options: Any) -> Path:
    """Write `record` as JSON (with a final newline) to `path` atomically; `dumps_options` go
    to json.dumps (indent, separators)."""
    return write_text(path, json.dumps(record, **dumps_options) + "\n")


def read_record(path: str | os.PathLike) -> Any | None:
    """The JSON record at `path`, or None where it is missing, unreadable or not JSON."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
