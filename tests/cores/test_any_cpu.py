"""bfloat16 on any CPU, checked on the one CI has: the bfloat16 tests of the recurrent cores run
again in a process whose oneDNN is capped at AVX2 (ONEDNN_MAX_CPU_ISA), as on an AMD EPYC without
AVX-512, where oneDNN has no bfloat16 LSTM (agents/cores/cpu_kernels.py). The uncapped run is the
suite's own run of tests/cores/test_bf16.py. Only the recurrent cores' kernels differ under the
cap (every core's bfloat16 tests were run capped once to find that out: the others pass as they
are), so only theirs are rerun, which keeps this to a few seconds.
"""

import os
import subprocess
import sys
from pathlib import Path

import torch

from agents.cores import cpu_kernels

ROOT = Path(__file__).resolve().parents[2]


def test_the_recurrent_cores_bf16_tests_pass_where_onednn_has_no_bf16_lstm():
    """Each LSTM call over several steps there would raise "could not create a primitive
    descriptor for the LSTM forward propagation primitive"; the core runs that pass in float32
    instead and says so once for the whole process (-s: its stderr comes through)."""
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "tests/cores/test_bf16.py",
               "-k", "(lstm or gru) and not without_a_bf16_kernel"]  # (that test plays the missing kernel itself)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert output.count(cpu_kernels.NOTICE) == 1, output[-3000:]


def test_the_probe_runs_on_the_cpu_only():
    """CUDA has bfloat16 RNN kernels, and the meta device (the tests' stand-in for CUDA) must
    touch no CPU tensor: neither asks the probe."""
    cpu_kernels._cpu_has_bf16_lstm.cache_clear()
    try:
        for device in (torch.device("meta"), torch.device("cuda")):
            assert not cpu_kernels.bf16_lstm_missing(device)
        assert cpu_kernels._cpu_has_bf16_lstm.cache_info().misses == 0
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cpu_kernels.bf16_lstm_missing(torch.device("cpu"))
        assert cpu_kernels._cpu_has_bf16_lstm.cache_info().misses == 1
    finally:
        cpu_kernels._cpu_has_bf16_lstm.cache_clear()
