"""Pressing Ctrl-C (or sending another stop signal) at a chosen moment of a trainer, for the tests
of both command lines.

In this process, `press_ctrl_c_in` sends SIGINT to the process from inside one function, so a
phase (setup, an update, a checkpoint write, the test) is hit exactly, and `exit_code` runs a
`main` and says how it ended. In a child process, `signal_when` waits until a condition holds
(say, a checkpoint written) and sends a signal to its process group, as a terminal does, or to
the process alone, as `kill` does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from typing import Callable

import pytest

from tests.launch import wait_until


def press_ctrl_c_in(monkeypatch, owner, name: str, when: Callable[..., bool] = lambda *args, **kwargs: True) -> None:
    """Make `owner.name` send SIGINT to this process, just before it runs, the first time it is
    called with arguments for which `when` holds."""
    original, pressed = getattr(owner, name), []

    def with_ctrl_c(*args, **kwargs):
        if not pressed and when(*args, **kwargs):
            pressed.append(True)
            signal.raise_signal(signal.SIGINT)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, with_ctrl_c)


def exit_code(main: Callable[[list[str]], object], argv: list[str]) -> int:
    """How main(argv) ended: its exit code, 0 for a return. A KeyboardInterrupt that gets out
    fails the test (rather than stopping the whole pytest session)."""
    try:
        main(argv)
    except SystemExit as exit_info:
        return exit_info.code
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt got out of main()")
    return 0


def signal_when(command: list[str], ready: Callable[[], bool], signum: int | tuple[int, ...] = signal.SIGINT, group: bool = True,
                timeout: float = 120) -> tuple[int, str]:
    """Run `command` in a new process group, send `signum` (or each of a tuple, in turn) as soon
    as `ready()` holds (to the whole group, as a terminal's Ctrl-C or Slurm do, or with
    `group=False` to the process alone, as `kill` and `timeout` do), and return its exit code
    and stderr."""
    with tempfile.TemporaryFile("w+") as stderr:  # a file, not a pipe: a full pipe would stall the child
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, text=True, start_new_session=True)
        try:
            if not wait_until(ready, process, timeout):
                stderr.seek(0)
                pytest.fail(f"not ready to signal (exit code {process.returncode}):\n{stderr.read()}")
            for each in signum if isinstance(signum, tuple) else (signum,):
                if group:
                    os.killpg(process.pid, each)
                else:
                    process.send_signal(each)
            process.wait(timeout=timeout)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        stderr.seek(0)
        return process.returncode, stderr.read()
