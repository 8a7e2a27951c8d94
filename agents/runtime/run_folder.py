"""A run folder belongs to one run: a lock for the run's life, and no silent overwrite.

Two trainers writing one folder would leave one's config beside the other's checkpoint and both
event files, and a new run started on a trained run's folder would replace its checkpoint and mix
its TensorBoard curves with the old ones. So the command lines (train_a2c.py, train_ppo.py,
python -m seqtasks) `claim` the folder before anything is written:

- a lock, `run.lock` in the folder (an flock, which the system drops when the process ends
  however it ends, so a killed run leaves no stale lock), held until the command exits; a second
  trainer is refused with the holder's pid, which the lock file holds. Under torchrun rank 0
  holds it for every rank.
- a folder that already holds a run (a checkpoint, or an experiment's train.done.json) is
  refused unless the run is resumed (`--resume`) or `--overwrite` says to start over, which
  deletes the old run's files first. A folder left by a run killed before its first checkpoint
  holds nothing to resume: a new run may start there (as an experiment rerunning the job does),
  and the old run's event files go, so that TensorBoard shows one run.
"""

from __future__ import annotations

import fcntl
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from agents.runtime import distributed
from agents.runtime.checkpoint import FILE_NAME

LOCK_NAME = "run.lock"
DONE_NAME = "train.done.json"  # what experiments/frame/jobs.py writes beside a finished run
EVENTS_GLOB = "events.out.tfevents.*"
# What a run writes in its folder: what --overwrite deletes (experiments add logs and records).
RUN_FILES = (FILE_NAME, "config.json", "results.json", DONE_NAME)


class RunFolderError(RuntimeError):
    """The folder is another run's: in use, or holding a run that would be overwritten."""


class RunLock:
    """The lock on one run folder; `release` (or the process's end) lets it go."""

    def __init__(self, run_dir: Path, file: IO[str]):
        self.run_dir, self._file = run_dir, file

    def release(self) -> None:
        if not self._file.closed:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()


def lock(run_dir: str | os.PathLike) -> RunLock:
    """Hold `run_dir`'s lock (making the folder); RunFolderError naming the holder's pid if
    another process holds it."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    file = open(run_dir / LOCK_NAME, "a+")
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.seek(0)
        holder = file.read().strip() or "unknown"
        file.close()
        raise RunFolderError(f"run folder {str(run_dir)!r} is in use by another run (pid {holder}); "
                             f"wait for it to end, or choose another --run-dir") from None
    file.seek(0)
    file.truncate()
    file.write(f"{os.getpid()}\n")
    file.flush()
    return RunLock(run_dir, file)


def claim(run_dir: str | os.PathLike, resume: bool, overwrite: bool = False) -> RunLock:
    """Lock `run_dir` for a run, new or resumed (see the module docstring); RunFolderError if it
    is in use, or holds a run that a new run would overwrite without `overwrite`."""
    held = lock(run_dir)
    try:
        if not resume:
            start_afresh(Path(run_dir), overwrite)
    except BaseException:
        held.release()
        raise
    return held


def start_afresh(run_dir: Path, overwrite: bool) -> None:
    """Clear `run_dir` for a new run: refuse (or with `overwrite`, delete) a run it holds; delete
    the event files of a run that never saved a checkpoint."""
    finished = [name for name in (FILE_NAME, DONE_NAME) if (run_dir / name).exists()]
    if finished and not overwrite:
        raise RunFolderError(
            f"run folder {str(run_dir)!r} already holds a run ({', '.join(finished)}); continue it with --resume {run_dir}, "
            f"start over with --overwrite (which deletes it), or choose another --run-dir")
    stale = sorted(run_dir.glob(EVENTS_GLOB))
    if finished:
        print(f"--overwrite: deleting the run in {run_dir} ({', '.join(finished)}, {len(stale)} event files)", file=sys.stderr)
        for name in RUN_FILES:
            (run_dir / name).unlink(missing_ok=True)
    elif stale:
        print(f"note: {run_dir} holds {len(stale)} event files of a run that stopped before its first checkpoint; "
              f"deleting them, so that TensorBoard shows this run alone", file=sys.stderr)
    for path in stale:
        path.unlink()


def claim_until(held: ExitStack | None, run_dir: str | os.PathLike, resume: bool, overwrite: bool = False) -> None:
    """`claim` for a command line, held until `held` closes; nothing without `held` (an
    in-process caller that owns the folder). Under torchrun rank 0 claims the folder for every
    rank, and a refusal reaches every rank, so none is left waiting."""
    if held is None:
        return
    locks: list[RunLock] = []
    distributed.init()
    distributed.from_main(lambda: locks.append(claim(run_dir, resume, overwrite)), "claiming the run folder")
    for lock_held in locks:
        held.callback(lock_held.release)
