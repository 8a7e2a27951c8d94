"""Helpers for tests that run several processes of one training on CPU with gloo: through
torchrun, as a user would, or as bare ranks (the environment torchrun would set, no agent), so a
test can kill one and see what the others do without torchrun stepping in."""

import os
import socket
import subprocess
import sys
from pathlib import Path

from agents.distributed import TIMEOUT_VARIABLE

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = "20"  # seconds for each collective: a lost rank shows well within a test's patience


def _environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), TIMEOUT_VARIABLE: TIMEOUT, **extra}


def torchrun(nprocs: int, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
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
