"""A run folder belongs to one run: a lock for the run's life, and no silent overwrite.

Two trainers writing one folder would leave one's config beside the other's checkpoint and both
event files, and a new run started on a trained run's folder would replace its checkpoint and mix
its TensorBoard curves with the old ones. So the command lines (train_a2c.py, train_ppo.py,
python -m seqtasks) `claim` the folder before anything is written:

- a lock, `run.lock` in the folder (an flock, which the system drops when the process ends
  however it ends, so a killed run leaves no stale lock), held until the command exits; a second
  trainer is refused with the holder's pid, which the lock file holds. Under torchrun rank 0
  holds it for every rank. The lock is opened following no link (durable/owned_files.py): a
  run.lock that is a symbolic or hard link, a folder or a pipe is refused, and nothing outside
  the folder is written. A --run-dir that cannot be made a folder (a file, under a file, read
  only) is refused in one line.
- a folder that already holds a run (a checkpoint, or an experiment's train.done.json) is
  refused unless the run is resumed (`--resume`) or `--overwrite` says to start over, which
  deletes the old run's files first (RUN_FILES and the event files; nothing else). A folder
  left by a run killed before its first checkpoint holds nothing to resume: a new run may start
  there, but event files there (that run's, or another tool's: they cannot be told apart) are
  deleted only with `--overwrite`, so that a new run deletes nothing it did not write.
- the temporary files a save killed outright (SIGKILL) left behind (durable/records.py) are
  removed once the lock is held, for a resumed run and a new one alike.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from pathlib import Path

from agents.runtime import distributed
from agents.runtime.checkpoint import FILE_NAME
from durable.owned_files import Busy, HeldLock, NotOurFile, hold_lock
from durable.records import remove_stale_temporaries

LOCK_NAME = "run.lock"
DONE_NAME = "train.done.json"  # what experiments/frame/jobs.py writes beside a finished run
EVENTS_GLOB = "events.out.tfevents.*"
# What a run writes in its folder: what --overwrite deletes (experiments add logs and records).
RUN_FILES = (FILE_NAME, "config.json", "results.json", DONE_NAME, "replay-a.npz", "replay-b.npz")  # replay: train_dqn.py's


class RunFolderError(RuntimeError):
    """The folder is another run's: in use, or holding a run that would be overwritten."""


def lock(run_dir: str | os.PathLike) -> HeldLock:
    """Hold `run_dir`'s lock (making the folder); RunFolderError naming the holder's pid if
    another process holds it, or saying why the folder or its lock cannot be ours."""
    run_dir = Path(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise RunFolderError(f"--run-dir {run_dir} cannot be a run folder: {error.strerror} "
                             f"({'a file is there' if run_dir.is_file() else error.filename}); choose another --run-dir") from None
    try:
        return hold_lock(run_dir / LOCK_NAME)
    except Busy as busy:
        raise RunFolderError(f"run folder {str(run_dir)!r} is in use by another run (pid {busy.holder}); "
                             f"wait for it to end, or choose another --run-dir") from None
    except NotOurFile as error:
        raise RunFolderError(f"run folder {str(run_dir)!r} cannot be locked: {error}") from None


def claim(run_dir: str | os.PathLike, resume: bool, overwrite: bool = False) -> HeldLock:
    """Lock `run_dir` for a run, new or resumed (see the module docstring), removing the
    temporary files of a killed save; RunFolderError if it is in use, or holds a run that a new
    run would overwrite without `overwrite`."""
    held = lock(run_dir)
    try:
        remove_stale_temporaries(Path(run_dir), RUN_FILES)
        if not resume:
            start_afresh(Path(run_dir), overwrite)
    except BaseException:
        held.release()
        raise
    return held


def start_afresh(run_dir: Path, overwrite: bool) -> None:
    """Clear `run_dir` for a new run: refuse (or with `overwrite`, delete) a run it holds and
    event files left there; nothing else is deleted."""
    finished = [name for name in (FILE_NAME, DONE_NAME) if (run_dir / name).exists()]
    if finished and not overwrite:
        raise RunFolderError(
            f"run folder {str(run_dir)!r} already holds a run ({', '.join(finished)}); continue it with --resume {run_dir}, "
            f"start over with --overwrite (which deletes it), or choose another --run-dir")
    stale = sorted(run_dir.glob(EVENTS_GLOB))
    if stale and not overwrite:
        raise RunFolderError(
            f"run folder {str(run_dir)!r} holds {len(stale)} event files (a run stopped before its first checkpoint, or "
            f"another tool's) and no checkpoint; --overwrite deletes them (so that TensorBoard shows this run alone), "
            f"or choose another --run-dir")
    if finished or stale:
        print(f"--overwrite: deleting the run in {run_dir} ({', '.join(finished) or 'no checkpoint'}, {len(stale)} event files)",
              file=sys.stderr)
    for name in RUN_FILES if overwrite else ():
        (run_dir / name).unlink(missing_ok=True)
    for path in stale:
        path.unlink()


def claim_until(held: ExitStack | None, run_dir: str | os.PathLike, resume: bool, overwrite: bool = False) -> None:
    """`claim` for a command line, held until `held` closes; nothing without `held` (an
    in-process caller that owns the folder). Under torchrun rank 0 claims the folder for every
    rank, and a refusal reaches every rank, so none is left waiting."""
    if held is None:
        return
    locks: list[HeldLock] = []
    distributed.init()
    distributed.from_main(lambda: locks.append(claim(run_dir, resume, overwrite)), "claiming the run folder")
    for lock_held in locks:
        held.callback(lock_held.release)
