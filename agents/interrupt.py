"""Ctrl-C for the trainers: the first one always ends the run with exit code 130, a short
message, and (once one can exist) a checkpoint that resumes exactly.

A checkpoint written after an interrupted update would hold half of it (the data or envs moved
on, the weights not), so a resumed run would not continue exactly. Both trainers (agents/train.py
and seqtasks/train.py) therefore train under StopOnInterrupt, where the first Ctrl-C lets the
update under way finish before they save; checkpoint writes hold Ctrl-C back until the file is
complete (held_interrupt); the command lines (train_a2c.py, python -m seqtasks) turn the
KeyboardInterrupt that ends a run into a message and exit code 130 (exit_interrupted). Outside
those blocks (setup, seqtasks' final test) Ctrl-C stops at once: there is nothing half done to save.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import NoReturn

from tqdm import tqdm

EXIT_CODE = 130  # 128 + SIGINT: what shells report for a program stopped by Ctrl-C


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # signals reach the main thread only


class StopOnInterrupt:
    """While active, the first Ctrl-C asks the loop to stop after the current update, so the
    checkpoint holds whole updates; a second one interrupts at once."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self) -> "StopOnInterrupt":
        if _in_main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        try:
            tqdm.write("Ctrl-C: stopping once the update under way is done and saved (Ctrl-C again to stop at once)", file=sys.stderr)
        except RuntimeError:  # the signal came in the middle of another write to stderr
            pass

    def __exit__(self, *exception) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


@contextmanager
def held_interrupt():
    """Hold Ctrl-C back while the block runs, then pass it on to the handler outside (which
    may raise KeyboardInterrupt there): for writes that must not be cut off halfway."""
    if not _in_main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        for signum in caught:
            signal.raise_signal(signum)


@contextmanager
def sigint_ignored():
    """Ctrl-C ignored while the block runs, for spawning worker processes: an ignored signal
    stays ignored across exec, so the workers start with it ignored and one typed while they
    are still importing prints no tracebacks of theirs. A Ctrl-C in this short window is lost,
    not deferred (a handler that defers it, as held_interrupt's, would not be inherited)."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def exit_interrupted(message: str) -> NoReturn:
    """End the program after Ctrl-C: `message` on stderr, exit code 130, no traceback."""
    print(f"\ninterrupted: {message}", file=sys.stderr)
    sys.exit(EXIT_CODE)
