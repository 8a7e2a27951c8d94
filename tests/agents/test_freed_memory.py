"""keep_freed_memory (agents/runtime/freed_memory.py): after it, a process that frees and takes
the same memory step after step (the Feedback core acting, its buffers refilled every HEADROOM
steps) takes no page faults for it; the environment's own glibc settings are left alone."""

import os
import platform
import subprocess
import sys

import pytest

from agents.cores.append_log import HEADROOM
from agents.runtime import freed_memory

ACTING = """
import resource, torch
from agents.runtime.freed_memory import keep_freed_memory
from agents.cores import make_core
kept = keep_freed_memory()
torch.set_num_threads(1)
core = make_core("feedback", 8, d_model=64, n_heads=4, n_layers=2, span=64).eval()
x, first = torch.randn(1, 64, 8), torch.zeros(1, 64, dtype=torch.bool)
windows = []
with torch.no_grad():
    state = core.initial_state(64, "cpu")
    for _ in range(256):  # the allocator's steady state
        _, state = core(x, state, first)
    for _ in range(WINDOWS):  # each window of HEADROOM calls refills the acting buffers once
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(HEADROOM):
            _, state = core(x, state, first)
        windows.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(kept, *windows)
""".replace("WINDOWS", "20").replace("HEADROOM", str(HEADROOM))
WORST_DROPPED = 4  # of 20 windows


glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's")


def faults_a_call(**environment) -> tuple[bool, float]:
    """(whether the thresholds were set, page faults per acting call) of a fresh process, over its
    windows without the WORST_DROPPED worst.

    Why not all of them: with the machine's cores oversubscribed (two test workers beside other
    work), a process that keeps its memory now and then touches 2 MiB afresh in one window, 512
    faults at once that the kernel counts as 513 new pages, in one or two windows of twenty;
    never on an idle machine. A refill that faults does so in every window, which the dropped
    windows cannot hide."""
    env = {k: v for k, v in os.environ.items() if k not in freed_memory.ENVIRONMENT} | environment
    out = subprocess.run([sys.executable, "-c", ACTING], capture_output=True, text=True, env=env, check=True, timeout=300).stdout
    kept, *windows = out.split()
    counted = sorted(int(w) for w in windows)[: len(windows) - WORST_DROPPED]
    return kept == "True", sum(counted) / (len(counted) * HEADROOM)


# glibc's starting thresholds (128 KiB), held: set in the environment, glibc does not raise them as it
# does its defaults, which over a run come to serve some sizes from the heap (a process on its
# defaults faults in some windows and not others, differently from run to run).
STARTING = {name: str(128 << 10) for name in freed_memory.ENVIRONMENT}


@glibc_only
def test_acting_takes_no_page_faults_once_freed_memory_is_kept():
    kept, faults = faults_a_call()
    held_kept, held = faults_a_call(**STARTING)  # the user's thresholds are left: every refill faults
    assert not held_kept and held > 5, f"the buffers' refills should fault under glibc's starting thresholds: {held} a call"
    assert kept and faults < 0.5, f"{faults} page faults an acting call with freed memory kept, {held} without"


@glibc_only
def test_thresholds_the_user_set_are_left_as_they_are():
    env = {k: v for k, v in os.environ.items() if k not in freed_memory.ENVIRONMENT}
    check = "from agents.runtime.freed_memory import keep_freed_memory; print(keep_freed_memory())"
    run = lambda **extra: subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env | extra, check=True).stdout  # noqa: E731
    assert run() == "True\n" and run(MALLOC_TRIM_THRESHOLD_=str(128 << 10)) == "False\n"
