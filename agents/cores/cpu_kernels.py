"""Whether this CPU has a bfloat16 kernel for nn.LSTM's fused pass: found by trying once.

Under bfloat16 autocast on the CPU, nn.LSTM over several steps runs oneDNN's LSTM primitive
(mkldnn_rnn_layer, which autocast puts in bfloat16), and oneDNN has that primitive in bfloat16
only on CPUs with AVX-512. Elsewhere (an AMD EPYC before Zen 4, or any CPU with
ONEDNN_MAX_CPU_ISA=AVX2) the call fails: "could not create a primitive descriptor for the LSTM
forward propagation primitive". So the first such call tries a one-step LSTM under autocast and
remembers whether it ran (`bf16_lstm_missing`); where it did not, the LSTM core runs that pass in
float32 with autocast off (agents/cores/lstm.py) and says so once on stderr (NOTICE). The probe is
tried on the CPU only: CUDA has bfloat16 RNN kernels, and the meta device (the tests' stand-in for
CUDA) has no autocast at all.

Everything else the cores run has a bfloat16 path on every CPU, as found under
ONEDNN_MAX_CPU_ISA=AVX2 (tests/cores/test_any_cpu.py runs the bfloat16 core tests so): the cells
torch.lstm_cell and torch.gru_cell and nn.GRU are not on autocast's list, so their products
autocast one by one as matmuls, which run at any ISA (oneDNN's, or ATen's own where cpuinfo finds
no AVX-512); and a core cast to bfloat16 (core.to(torch.bfloat16)) takes ATen's own LSTM kernel,
not oneDNN's.
"""

from __future__ import annotations

import functools
import sys

import torch

from agents.cores.dtypes import autocast_on

NOTICE = "--precision bf16: the LSTM runs in float32 on this CPU: no bfloat16 LSTM kernel (oneDNN has it only with AVX-512)"


def bf16_lstm_missing(device: torch.device) -> bool:
    """Whether nn.LSTM's fused pass, called now on `device`, would find no kernel: bfloat16
    autocast is on there, it is a CPU, and the probe failed. Prints NOTICE the first time."""
    if device.type != "cpu" or not autocast_on(device) or torch.get_autocast_dtype("cpu") != torch.bfloat16:
        return False
    if _cpu_has_bf16_lstm():
        return False
    _say_once()
    return True


@functools.cache
def _cpu_has_bf16_lstm() -> bool:
    """Try a one-step, one-unit LSTM under bfloat16 autocast (zero weights made here: no random
    numbers drawn, so a seeded run's stream is the same whether the probe ran or not)."""
    zero = torch.zeros(1, 1, 1)
    weights = [torch.zeros(4, 1), torch.zeros(4, 1), torch.zeros(4), torch.zeros(4)]  # w_ih, w_hh, b_ih, b_hh
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
            torch.lstm(zero, (zero, zero), weights, True, 1, 0.0, False, False, False)
    except RuntimeError:
        return False
    return True


@functools.cache
def _say_once() -> None:
    print(NOTICE, file=sys.stderr, flush=True)
