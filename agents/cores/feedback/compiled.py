"""The Feedback core's compiled step: csrc/feedback_step.cpp, built at first use, and when it runs.

On the CPU a Feedback step is ~170 small tensor operations forward and backward; from Python
each costs a call, an autograd check and a dispatch, about as much as its arithmetic at the CPU
preset's sizes. The C++ file runs a call's steps and their backward with the same operations
called from C++ below autograd (core.py hands it the run's buffers and keeps its tape).

Built with torch.utils.cpp_extension.load (ninja and the machine's C++ compiler) into a cache
directory (TORCH_EXTENSIONS_DIR, by default ~/.cache/torch_extensions), once per machine, torch
version and version of the source (its hash names the build); one line on stderr says so while
it builds. (Not -march=native: a cache shared between machines would then crash on an older CPU.) Where it cannot be built (no
compiler, no ninja, a failed build) the Python fused step runs, said once on stderr.

Which calls run compiled: on the CPU, computing in float32 or float64 (no autocast, weights not
cast to a narrow dtype), without persistent vectors. Every other variant (pre- or post-norm,
shared or per-layer key/value projections, dropout, any value_init, d_ff, span, sizes) runs
compiled; persistent vectors, bfloat16 / float16 (cast or autocast), CUDA and the meta device
run the Python fused step. FEEDBACK_RL_COMPILED=0 in the environment turns the compiled step
off (read at each call).
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

SOURCE = Path(__file__).parent / "csrc" / "feedback_step.cpp"
FLAGS = ["-O3", "-fopenmp-simd"]  # -fopenmp-simd: the loops' `omp simd` hints, without OpenMP's runtime
SWITCH = "FEEDBACK_RL_COMPILED"
DTYPES = (torch.float32, torch.float64)
_built: list = []  # [] until the first attempt; then [the module, or None where it failed]


def enabled() -> bool:
    """Whether the environment allows the compiled step (FEEDBACK_RL_COMPILED, default on)."""
    value = os.environ.get(SWITCH, "1")
    if value not in ("0", "1"):
        raise ValueError(f"{SWITCH} must be 0 or 1, got {value!r}")
    return value == "1"


def applies(device: torch.device, dtype: torch.dtype, weights_dtype: torch.dtype, persistent: int) -> bool:
    """Whether a call on `device` computing in `dtype` runs compiled (see the module docstring)."""
    return device.type == "cpu" and dtype in DTYPES and dtype == weights_dtype and persistent == 0 and enabled()


def extension() -> ModuleType | None:
    """The compiled step, built (or loaded from the cache) at the first call; None where it cannot be."""
    if not _built:
        _built.append(_build())
    return _built[0]


def _build() -> ModuleType | None:
    from torch.utils import cpp_extension

    name = f"feedback_rl_step_{hashlib.sha256(SOURCE.read_bytes() + repr(FLAGS).encode()).hexdigest()[:12]}"  # a build per source
    built_before = any(Path(cpp_extension._get_build_directory(name, verbose=False)).glob(f"{name}*.so"))
    if not built_before:
        print("building the compiled Feedback step (once, ~1 min)...", file=sys.stderr, flush=True)
    began = time.perf_counter()
    try:
        module = cpp_extension.load(name, [str(SOURCE)], extra_cflags=FLAGS, verbose=False)
    except Exception as error:  # no compiler, no ninja, a failed build: any of them leaves the Python path
        print(f"the compiled Feedback step could not be built ({_first_error(error)}); the Python fused step runs instead",
              file=sys.stderr, flush=True)
        return None
    if not built_before:
        print(f"built the compiled Feedback step in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    return module


def _first_error(error: Exception) -> str:
    """The line of a failed build that says why: the compiler's first error, else the exception's last line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
    return next((line for line in lines if "error:" in line), f"{type(error).__name__}: {lines[-1]}")
