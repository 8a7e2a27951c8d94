"""Helpers for tests that run several processes of one training on CPU with gloo: through
torchrun, as a user would, or as bare ranks (the environment torchrun would set, no agent), so a
test can kill one and see what the others do without torchrun stepping in; and the wait of a test
on a child process's condition (a checkpoint written), which tests/ctrl_c.py uses too."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from agents.runtime.distributed import TIMEOUT_VARIABLE

ROOT = Path(__file__).resolve().parents[1]
# Seen under load average 4-5 on the 2-core machine (the suite beside other work): the torchrun
# tests took 18-31 s each (one or two launches and a one-process run), and a healthy rank waits
# for another no longer than the start-up skew or rank 0's checkpoint write, each a part of that.
# So each collective may wait 60 s before a rank counts as lost, and every wait of a test on its
# processes (one launch, a file appearing, a rank exiting) has a deadline of DEADLINE seconds,
# ten times the slowest whole test seen and far above a lost rank's 60 s.
TIMEOUT = "60"
DEADLINE = 300.0
POLL_SECONDS = 0.05  # how often a wait looks at its condition: no race, only how soon it sees it


def _environment(**extra: str) -> dict[str, str]:
    """The ranks train on the CPU even where a GPU is (a CUDA run takes a GPU per process), and
    import this checkout before anything else on the PYTHONPATH."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": "", TIMEOUT_VARIABLE: TIMEOUT, **extra}


def torchrun(nprocs: int, *argv: str, timeout: float = DEADLINE) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc-per-node nprocs ARGV` from the repository root (a free port)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nprocs}", *argv]
    return subprocess.run(command, cwd=ROOT, env=_environment(), capture_output=True, text=True, timeout=timeout)


def start_ranks(nprocs: int, *argv: str) -> list[subprocess.Popen]:
    """`nprocs` bare ranks of `python ARGV`, started as torchrun would start them."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return [
        subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=_environment(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_WORLD_SIZE=str(nprocs),
                                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
        for rank in range(nprocs)
    ]


def wait_until(ready: Callable[[], bool], process: subprocess.Popen, timeout: float = DEADLINE) -> bool:
    """Look at `ready()` every POLL_SECONDS until it holds (True), or until `process` has exited
    or `timeout` seconds have passed without it (False: the caller says what went wrong)."""
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(POLL_SECONDS)
    return True
