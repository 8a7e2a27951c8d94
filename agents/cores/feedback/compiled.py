"""The Feedback core's compiled step: csrc/feedback_step.cpp, built at first use, and which path a
core takes.

On the CPU a Feedback step is ~170 small tensor operations forward and backward; from
Python each costs a call, an autograd check and a dispatch, about as much as its arithmetic at
the CPU preset's sizes. The C++ file runs a call's steps and their backward with the same
operations called from C++ below autograd (core.py hands it the run's buffers and keeps its
tape).

Built with torch.utils.cpp_extension.load (ninja and the machine's C++ compiler) into a cache
directory (TORCH_EXTENSIONS_DIR, by default ~/.cache/torch_extensions), once per machine, torch
installation, checkout and version of the source (their hash names the build); one line on stderr says
so while it builds. (Not -march=native: a cache shared between machines would then crash on an older CPU.)

Which path: the Feedback config's `step` (STEPS). "python" is the Python fused step
(step.py) everywhere. "compiled" is this one, and runs on the CPU computing in float32 or
float64 (no autocast, weights not cast to a narrow dtype), without persistent vectors (which
the Python step runs), where the extension builds and FEEDBACK_RL_COMPILED is not 0; anything
else is refused with the reason. Every other variant (pre- or post-norm, shared or per-layer
key/value projections, dropout, the gated carry carry="gate", the tanh write, the kept slot
keep_slot=True, any value_init, d_ff, span, sizes)
runs compiled. "auto" takes the compiled step where it can run and the Python step elsewhere. A
run chooses once, at its start, for its device and precision (`choose`, through
agents/config/config_cli.py's run_core_options), and its config holds the path it chose; a core
built with "auto" itself (tests, a checkpoint from before `step`) chooses at its first call of
each device and dtype. FEEDBACK_RL_COMPILED=0 in the environment keeps "auto" on the Python
step; it is read when a core is built.
"""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import torch

SOURCE = Path(__file__).parent / "csrc" / "feedback_step.cpp"
FLAGS = ["-O3", "-fopenmp-simd"]  # -fopenmp-simd: the loops' `omp simd` hints, without OpenMP's runtime
SWITCH = "FEEDBACK_RL_COMPILED"
STEPS = ("auto", "compiled", "python")
DTYPES = (torch.float32, torch.float64)
_built: list = []  # [] until the first attempt; then [the module, or None where it failed]


def blocker(persistent: int) -> str | None:
    """Why no call of a core with `persistent` vectors can take the compiled step, as far as the
    core alone says (the switch, read here; persistent vectors), or None."""
    value = os.environ.get(SWITCH, "1")
    if value not in ("0", "1"):
        raise ValueError(f"{SWITCH} must be 0 or 1, got {value!r}")
    if value == "0":
        return f"{SWITCH}=0 in the environment keeps the Python step"
    if persistent:
        return f"persistent vectors (persistent={persistent}) run on the Python step only"
    return None


def misfit(device: torch.device, dtype: torch.dtype, weights_dtype: torch.dtype) -> str | None:
    """Why a call on `device` computing in `dtype` (weights in `weights_dtype`) cannot take the
    compiled step, or None."""
    if device.type != "cpu":
        return f"it runs on the CPU, and this is on {device.type}"
    if dtype not in DTYPES or dtype != weights_dtype:
        name = lambda d: str(d).removeprefix("torch.")  # noqa: E731
        return f"it computes in float32 or float64 with weights of that dtype, not in {name(dtype)} with {name(weights_dtype)} weights"
    return None


def choose(step: str, blocked: str | None, device: torch.device, dtype: torch.dtype, weights_dtype: torch.dtype) -> str:
    """"compiled" or "python": the path of calls on `device` computing in `dtype` (weights in
    `weights_dtype`) for a core whose `step` is `step` and whose blocker() said `blocked`.
    "compiled" that cannot run is a ValueError saying why (building the extension, the first time)."""
    if step == "python":
        return "python"
    reason = blocked or misfit(device, dtype, weights_dtype)
    if reason is None and extension() is None:
        reason = "its extension could not be built (the line above says why)"
    if reason is None:
        return "compiled"
    if step == "compiled":
        raise ValueError(f"step 'compiled' cannot run here: {reason}; use step=python (or auto, which takes the compiled step where it runs)")
    return "python"


def extension() -> ModuleType | None:
    """The compiled step, built (or loaded from the cache) at the first call; None where it cannot be."""
    if not _built:
        _built.append(_build())
    return _built[0]


def build_name(stem: str, source: bytes) -> str:
    """`stem`_HASH: the name of a build of `source` (its code and flags) against this torch and
    Python. The installation is in the hash because the build folder's ninja file holds the
    headers' paths: two virtual environments sharing the cache under one name would each find the
    other's command line there and rebuild (a minute each time), and a process loading while
    another rebuilt would wait for it."""
    installation = f"{torch.__version__} {Path(torch.__file__).parent} {sysconfig.get_paths()['include']}"
    return f"{stem}_{hashlib.sha256(source + installation.encode()).hexdigest()[:12]}"


def step_build_name(source: Path) -> str:
    """The build name of the step's source file `source`: its code, the flags and its path. The
    path is in it for the ninja file's reason: that file names the source it compiles, so two
    checkouts of the same code (one per experiment, a worktree) sharing a build would each find
    the other's path there and rebuild, each run that started after the other's."""
    return build_name("feedback_rl_step", source.read_bytes() + repr(FLAGS).encode() + str(source.resolve()).encode())


def _build() -> ModuleType | None:
    from torch.utils import cpp_extension

    name = step_build_name(SOURCE)
    built_before = any(Path(cpp_extension._get_build_directory(name, verbose=False)).glob(f"{name}*.so"))
    if not built_before:
        print("building the compiled Feedback step (once, ~1 min)...", file=sys.stderr, flush=True)
    began = time.perf_counter()
    try:
        with held_build(Path(cpp_extension._get_build_directory(name, verbose=False))):
            module = cpp_extension.load(name, [str(SOURCE)], extra_cflags=FLAGS, verbose=False)
    except Exception as error:  # no compiler, no ninja, a failed build: any of them leaves the Python path
        print(f"the compiled Feedback step could not be built ({_first_error(error)})", file=sys.stderr, flush=True)
        return None
    if not built_before:
        print(f"built the compiled Feedback step in {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    return module


@contextmanager
def held_build(folder: Path) -> Iterator[None]:
    """Hold the build folder for this process while torch loads or builds in it.

    torch guards a build with a `lock` file it deletes when done (a FileBaton), and every later
    load waits, without end, while that file exists: a build killed mid-way (kill -9, a closed
    terminal, a killed test) leaves every later run of the Feedback core waiting for ever. Ours is
    an OS lock (flock) on a file of our own, which dies with its process: a process that holds it
    knows no build of ours is under way, so a `lock` file there is a killed build's and is
    removed. Where there is no flock (Windows), torch's own baton is left as it is."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "feedback_rl_build.flock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # waits while another process of ours builds or loads
        try:
            (folder / "lock").unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _first_error(error: Exception) -> str:
    """The line of a failed build that says why: the compiler's first error, else the exception's last line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
    return next((line for line in lines if "error:" in line), f"{type(error).__name__}: {lines[-1]}")
