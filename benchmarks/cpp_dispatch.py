"""What one ATen operation costs to dispatch from C++, as the compiled Feedback step calls them.

A replayed operation's time (benchmarks/op_replay.py) is taken less Python's dispatch of it, so
the floor it builds holds each operation's kernel alone. The compiled step still dispatches its
~170 operations a step from C++: each goes through ATen's dispatcher, makes a tensor and frees
one, even where the kernel does nothing. That cost is part of what the step cannot avoid, and
`cpp_dispatch_cost` measures it: a view operation (`at::alias`, no work) called in a C++ loop
below autograd, as the step calls its operations (feedback_step.cpp's guards).

The loop is a small C++ extension built at first use into torch's extension cache (the
machine's compiler, as the compiled step is built, and named per torch installation as it is);
where it cannot be built the cost is None and the roofline says it left it out.
"""

from __future__ import annotations

import inspect
import sys
from types import ModuleType

import torch

from agents.cores.feedback.compiled import build_name
from benchmarks.targets import floor_per_call

SOURCE = r"""
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/utils/pybind.h>

// `calls` view operations on `tensor`, below autograd as the compiled step runs its own.
void alias_calls(const at::Tensor& tensor, int64_t calls) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::NoGradGuard no_grad;
  for (int64_t i = 0; i < calls; ++i) {
    at::Tensor view = at::alias(tensor);
  }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("alias_calls", &alias_calls); }
"""
CALLS = 1000  # views a Python call makes: Python's own call, divided among them, is negligible

_built: list[ModuleType | None] = []


def cpp_dispatch_cost(seconds: float = 0.2) -> float | None:
    """Seconds one ATen operation takes to dispatch from C++ (a view, timed over `seconds`; the
    floor of five timings, as op_replay's are), or None where the loop could not be built."""
    module = _extension()
    if module is None:
        return None
    tensor = torch.zeros(4, 4)
    return floor_per_call(lambda: module.alias_calls(tensor, CALLS), seconds) / CALLS


def _extension() -> ModuleType | None:
    if not _built:
        from torch.utils import cpp_extension

        try:
            # The source brings its own headers and binding; <torch/extension.h>, which load_inline
            # would add, doubles the compile time (no_implicit_headers: torch 2.6 on).
            lighter = {"no_implicit_headers": True} if "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters else {}
            _built.append(cpp_extension.load_inline(build_name("feedback_rl_cpp_dispatch", SOURCE.encode()), SOURCE,
                                                    extra_cflags=["-O2"], verbose=False, **lighter))
        except Exception as error:  # no compiler, no ninja: the roofline goes on without this part
            print(f"the C++ dispatch loop could not be built ({type(error).__name__}); its cost is left out", file=sys.stderr)
            _built.append(None)
    return _built[0]
