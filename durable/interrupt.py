"""Stop signals for the trainers and the experiment runner: Ctrl-C, and what a cluster or a
shell sends, all end a run the same way: exit code 128 + the signal, a short message, and (once
one can exist) a checkpoint that resumes exactly.

The stop signals (STOP_SIGNALS) are SIGINT (Ctrl-C), SIGTERM (`kill`, `timeout`, `scancel`, a
Slurm time limit, a container stop), SIGHUP (a closed terminal) and SIGUSR2 (what submitit asks
Slurm to send before a time limit or on preemption; Slurm sends it to every process of the job).
While a command line runs, `stop_signals_raise` makes each of them raise StopSignal, a
KeyboardInterrupt, as Python does for SIGINT alone.

A checkpoint written after an interrupted update would hold half of it (the data or envs moved
on, the weights not), so a resumed run would not continue exactly. Both trainers (agents/learners/train.py
and seqtasks/train.py) therefore train under StopOnInterrupt, where the first stop signal lets the
update under way finish before they save (a second Ctrl-C stops at once; see StopOnInterrupt);
checkpoint writes hold the signals back until the file
is complete (held_interrupt); the command lines (train_a2c.py, python -m seqtasks) turn the
StopSignal that ends a run into a message and its exit code (exit_interrupted). Outside those
blocks (setup, seqtasks' final test) a stop signal stops at once: there is nothing half done to save.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import NoReturn

from tqdm import tqdm

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR2)
EXIT_CODE = 128 + signal.SIGINT  # 130: what shells report for a program stopped by Ctrl-C


class StopSignal(KeyboardInterrupt):
    """A stop signal ended the program; `signum` says which (SIGINT for a plain KeyboardInterrupt)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_of(interrupt: KeyboardInterrupt) -> int:
    """The signal behind a KeyboardInterrupt: its StopSignal's, or SIGINT (Python's own)."""
    return interrupt.signum if isinstance(interrupt, StopSignal) else signal.SIGINT


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # signals reach the main thread only


def _raise_stop(signum, frame) -> NoReturn:
    raise StopSignal(signum)


@contextmanager
def stop_signals_raise():
    """Every stop signal raises StopSignal in the main thread while the block runs: a command
    line's main() runs in it, so that SIGTERM ends it through its `except KeyboardInterrupt` as
    Ctrl-C does (and SIGINT is caught even where the shell started us with it ignored, as
    `cmd &` does). The handlers before it are restored after."""
    if not _in_main_thread():
        yield
        return
    previous = _set_handlers(_raise_stop)
    try:
        yield
    finally:
        _restore(previous)


def ignore_stop_signals() -> None:
    """For worker processes (actor workers): their parent stops them once it has saved."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _set_handlers(handler) -> dict[int, object]:
    """Install `handler` for every stop signal; returns the handlers it replaced."""
    return {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}


def _restore(previous: dict[int, object]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


class StopOnInterrupt:
    """While active, the first stop signal asks the loop to stop after the current update, so
    the checkpoint holds whole updates; a second Ctrl-C interrupts at once. Other signals after
    the first change nothing: they are not a person's impatience but the same request again, as
    when Slurm preempts a job (SIGTERM, then SIGUSR2) or signals a runner and its runs alike.
    `signum` is the first signal's, for the exit code; `stop()` raises the StopSignal that ends
    the run."""

    def __init__(self):
        self.requested = False
        self.signum = signal.SIGINT
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "StopOnInterrupt":
        if _in_main_thread():
            self._previous = _set_handlers(self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            if signum == signal.SIGINT:
                raise StopSignal(signum)
            return
        self.requested, self.signum = True, signum
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        try:
            tqdm.write(f"{name}: stopping once the update under way is done and saved (Ctrl-C again to stop at once)", file=sys.stderr)
        except RuntimeError:  # the signal came in the middle of another write to stderr
            pass

    def __exit__(self, *exception) -> None:
        _restore(self._previous)

    def stop(self) -> NoReturn:
        raise StopSignal(self.signum)


@contextmanager
def held_interrupt():
    """Hold the stop signals back while the block runs, then pass them on to the handlers
    outside (which may raise StopSignal there): for writes that must not be cut off halfway."""
    if not _in_main_thread():
        yield
        return
    caught = []
    previous = _set_handlers(lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        _restore(previous)
        for signum in caught:
            signal.raise_signal(signum)


@contextmanager
def stop_signals_ignored():
    """Stop signals ignored while the block runs, for spawning worker processes: an ignored
    signal stays ignored across exec, so the workers start with them ignored and one that comes
    while they are still importing prints no tracebacks of theirs. A signal in this short window
    is lost, not deferred (a handler that defers it, as held_interrupt's, would not be inherited)."""
    if not _in_main_thread():
        yield
        return
    previous = _set_handlers(signal.SIG_IGN)
    try:
        yield
    finally:
        _restore(previous)


def exit_interrupted(message: str, interrupt: KeyboardInterrupt) -> NoReturn:
    """End the program after a stop signal: `message` on stderr, exit code 128 + the signal
    (130 for Ctrl-C, 143 for SIGTERM), no traceback."""
    signum = signal_of(interrupt)
    name = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    print(f"\ninterrupted{name}: {message}", file=sys.stderr)
    sys.exit(128 + signum)
