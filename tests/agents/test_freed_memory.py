"""keep_freed_memory (agents/runtime/freed_memory.py): after it, a process that frees and takes
the same memory step after step (the Feedback core acting, its buffers refilled every HEADROOM
steps) takes no page faults for it; the environment's own glibc settings are left alone."""

import os
import platform
import subprocess
import sys

import pytest

from agents.runtime import freed_memory

ACTING = """
import resource, sys, torch
from agents.runtime.freed_memory import keep_freed_memory
from agents.cores import make_core
kept = keep_freed_memory() if sys.argv[1] == "keep" else False
torch.set_num_threads(1)
core = make_core("feedback", 8, d_model=64, n_heads=4, n_layers=2, span=64).eval()
x, first = torch.randn(1, 64, 8), torch.zeros(1, 64, dtype=torch.bool)
with torch.no_grad():
    state = core.initial_state(64, "cpu")
    for _ in range(256):  # the allocator's steady state
        _, state = core(x, state, first)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(640):  # ten refills of the acting buffers
        _, state = core(x, state, first)
print(kept, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 640)
"""

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's")


def faults_a_call(mode: str, **environment) -> tuple[bool, float]:
    """(whether the thresholds were set, page faults per acting call) of a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in freed_memory.ENVIRONMENT} | environment
    out = subprocess.run([sys.executable, "-c", ACTING, mode], capture_output=True, text=True, env=env, check=True, timeout=300).stdout
    kept, faults = out.split()
    return kept == "True", float(faults)


@glibc_only
def test_acting_takes_no_page_faults_once_freed_memory_is_kept():
    kept, faults = faults_a_call("keep")
    _, untouched = faults_a_call("default")  # glibc's own thresholds: the buffers' refills fault (5.5 a call on glibc 2.36)
    # about none once kept (0.0 on an idle machine, 0.8 beside another test run): at most a quarter of glibc's own
    assert kept and faults < max(0.5, untouched / 4), f"{faults} page faults an acting call kept, {untouched} not"


@glibc_only
def test_thresholds_the_user_set_are_left_as_they_are():
    env = {k: v for k, v in os.environ.items() if k not in freed_memory.ENVIRONMENT}
    check = "from agents.runtime.freed_memory import keep_freed_memory; print(keep_freed_memory())"
    run = lambda **extra: subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env | extra, check=True).stdout  # noqa: E731
    assert run() == "True\n" and run(MALLOC_TRIM_THRESHOLD_=str(128 << 10)) == "False\n"
