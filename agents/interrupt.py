"""Ctrl-C for training loops: finish the current update, then stop and save.

A checkpoint written after an interrupted update would hold half of it (the data or envs moved
on, the weights not), so a resumed run would not continue exactly; both trainers (agents/train.py
and seqtasks/train.py) let the first Ctrl-C end the loop between updates instead.
"""

from __future__ import annotations

import signal
import threading

from tqdm import tqdm


class StopOnInterrupt:
    """While active, the first Ctrl-C asks the loop to stop after the current update, so the
    checkpoint holds whole updates; a second one interrupts at once."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self) -> "StopOnInterrupt":
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        tqdm.write("stopping after this update (Ctrl-C again to stop at once)")

    def __exit__(self, *exception) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
