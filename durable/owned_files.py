"""Files opened in place in a folder someone else may have handed us: locks and logs that follow no link.

A run folder (or a study's) can come from another person, and anything in it may be a symbolic
link to a file elsewhere, a hard link to one, a folder, or a named pipe. Opening such a name with
`open(path, "a+")` follows the link and writes (or truncates) the file it points to, and a pipe
blocks the opener for ever. So the files written in place, not through records.py:atomic_file
(which writes a fresh temporary file and renames it over the name, replacing a link rather than
following it), are opened here: with O_NOFOLLOW and O_CREAT, never blocking, and kept only when
what was opened is a regular file with one link, which is then ours to write; anything else is
refused with NotOurFile naming it, and nothing is written or truncated.

`hold_lock(path)` takes an flock on such a file and writes the holder's pid into it;
`open_append(path)` opens a log to append to.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import IO

OPEN_FLAGS = os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
KINDS = {stat.S_ISDIR: "a folder", stat.S_ISFIFO: "a pipe", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a device", stat.S_ISBLK: "a device"}


class NotOurFile(OSError):
    """A name that cannot be opened as a regular file of ours: a link, a folder, a pipe, or a
    file the system will not let us create or write."""


class Busy(RuntimeError):
    """Another process holds the lock; `holder` is the pid it wrote, or "unknown"."""

    def __init__(self, path: Path, holder: str):
        super().__init__(f"{path} is held by process {holder}")
        self.path, self.holder = path, holder


def open_owned(path: str | os.PathLike, flags: int) -> int:
    """A descriptor of `path` opened with `flags` (plus OPEN_FLAGS), made if missing; NotOurFile
    if it is a symbolic link, not a regular file, or a hard link to another name."""
    path = Path(path)
    try:
        handle = os.open(path, flags | OPEN_FLAGS, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise NotOurFile(f"{path} is a symbolic link; it is refused rather than followed (remove it)") from None
        if error.errno == errno.EISDIR:
            raise NotOurFile(f"{path} is a folder, where a file of ours belongs (remove it)") from None
        raise NotOurFile(f"cannot open {path}: {error.strerror}") from None
    mode, links = os.fstat(handle).st_mode, os.fstat(handle).st_nlink
    problem = next((kind for test, kind in KINDS.items() if test(mode)), None)
    if problem is None and links > 1:
        problem = f"a hard link to another file ({links} names)"
    if problem is not None:
        os.close(handle)
        raise NotOurFile(f"{path} is {problem}, where a regular file of ours belongs; nothing was written to it (remove it)")
    return handle


def open_append(path: str | os.PathLike) -> IO[str]:
    """`path` opened to append text (a log), following no link (see the module docstring)."""
    handle = open_owned(path, os.O_WRONLY | os.O_APPEND)
    os.set_blocking(handle, True)
    return os.fdopen(handle, "a")


class HeldLock:
    """An flock on a file of ours holding our pid; `release` (or the process's end) lets it go."""

    def __init__(self, path: Path, handle: int):
        self.path, self._handle = path, handle

    def release(self) -> None:
        if self._handle >= 0:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            os.close(self._handle)
            self._handle = -1


def hold_lock(path: str | os.PathLike) -> HeldLock:
    """Hold the lock file `path` (made if missing): NotOurFile if it is not a regular file of
    ours, Busy (with the holder's pid) if another process holds it. Its content, the pid, is
    rewritten only once the lock is ours."""
    path = Path(path)
    handle = open_owned(path, os.O_RDWR)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(handle, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(handle)
        raise Busy(path, holder) from None
    os.ftruncate(handle, 0)
    os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
    return HeldLock(path, handle)
