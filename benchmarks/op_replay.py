"""Every ATen operation of a call, replayed alone: the time its operations take at ATen's own rate,
a floor for the call made of what it runs.

A roofline needs, for each part of a step, the least time that part can take here. For the matrix
products that is operations over the rate ATen reaches at their shapes; for the rest of a step
(copies, layer norms, softmax, the small element-wise operations and allocations) it is each
operation's own time on tensors of its shapes, alone, warm in the cache. `replayed_floor` records
every operation a call dispatches (torch's dispatch mode sees those the C++ extension calls too,
below autograd, so the backward's are in), groups them by operation, shapes, strides and
arguments, and times one of each on fresh tensors of the same layout, repeated, with subnormal
floats flushed (an in-place operation replayed thousands of times must not slow down on them).

Replayed over the same tensors, an operation finds its data in the core's own caches, which in
a learning call it mostly does not: the tape the backward reads was written many operations
before. So `evict_bytes` replays each operation over enough copies of its arguments, in turn, to
exceed the core's L2 cache (`l2_cache_bytes`), so that each call reads its data from further
out, as the call's operations do.

What it leaves out: code that is no ATen operation (the compiled step's own loops), and the cost
of running the operations one after another in the call (their dispatch from C++, whatever
cache misses differ from the replay's). Each replay is a Python call, so its time holds Python's
dispatch of the operation; `call_overhead` measures that on a view operation, for the caller to
take off (and benchmarks/cpp_dispatch.py what dispatching it from C++ costs, to add back).
"""

from __future__ import annotations

import collections
import functools
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from benchmarks.targets import floor_per_call, per_call

REPEATS = 5  # timings of each operation, the least kept
MAX_COPIES = 256  # of one operation's arguments, for evict_bytes: an operation on a few KiB stays in L2 (its time is its calling cost)


class _Layout:
    """A tensor argument as replay needs it: its layout and kind, not its values."""

    def __init__(self, tensor: torch.Tensor):
        self.shape, self.stride, self.dtype = tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype

    def nbytes(self) -> int:
        """The bytes its storage spans."""
        return (1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride)) if all(self.shape) else 0) * self.dtype.itemsize

    def key(self) -> tuple:
        return ("tensor", self.shape, self.stride, self.dtype)

    def fresh(self) -> torch.Tensor:
        """A new tensor of this layout (strides of 0, an expanded tensor's, included): normal
        floats, zeros for integers (valid indices), bools half set."""
        size = self.nbytes() // self.dtype.itemsize
        if self.dtype.is_floating_point:
            base = torch.randn(size).to(self.dtype)
        elif self.dtype == torch.bool:
            base = torch.rand(size) < 0.5
        else:
            base = torch.zeros(size, dtype=self.dtype)
        return base.as_strided(self.shape, self.stride)


class _Recorder(TorchDispatchMode):
    """Counts each (operation, argument layouts and values) a call dispatches."""

    def __init__(self):
        super().__init__()
        self.calls: collections.Counter = collections.Counter()
        self.example: dict[tuple, tuple] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        layout_args, layout_kwargs = tree_map(lambda a: _Layout(a) if isinstance(a, torch.Tensor) else a, (args, kwargs))
        key = (func, _key(layout_args), _key(layout_kwargs))
        self.calls[key] += 1
        self.example.setdefault(key, (func, layout_args, layout_kwargs))
        return func(*args, **kwargs)


def _key(value: Any) -> Any:
    """A hashable key of recorded arguments."""
    if isinstance(value, _Layout):
        return value.key()
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _key(v)) for k, v in value.items()))
    return repr(value)


def call_overhead(seconds: float) -> float:
    """Seconds Python takes to dispatch one ATen operation as the replay does (a view, which does
    no work): what each replayed operation's time holds beyond the operation itself. A floor, as
    the replays' times are, so that a loaded machine does not make it exceed them."""
    tensor = torch.zeros(4, 4)
    return floor_per_call(lambda: torch.ops.aten.alias.default(tensor), seconds, REPEATS)


@dataclass
class Replayed:
    """One distinct operation of the call: its name, its tensor arguments' shapes, how many times a
    step ran it and the seconds a step those take, replayed alone (Python's dispatch included)."""

    name: str
    shapes: list[tuple[int, ...]]
    per_step: float
    seconds: float


def l2_cache_bytes(default: int = 2 * 2**20) -> int:
    """The first CPU's L2 cache as Linux reports it (sysfs), else `default`."""
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (index / "level").read_text().strip() == "2":
                size = (index / "size").read_text().strip()  # e.g. "2048K"
                return int(size[:-1]) * {"K": 2**10, "M": 2**20}[size[-1]] if size[-1] in "KM" else int(size)
        except (OSError, ValueError):
            break
    return default


def replayed_floor(call: Callable[[], Any], calls_per_step: float, evict_bytes: Sequence[int] = (0,),
                   seconds: float = 0.05) -> tuple[dict[int, list[Replayed]], float]:
    """Run `call()` once recording its ATen operations, then time each distinct one alone, once
    for each of `evict_bytes`: over copies of its arguments, taken in turn, that add up to that
    many bytes or more (0: the same arguments each time, warm in the cache). Each operation's
    ways are timed in turn, REPEATS times for `seconds` in all, and the least kept: a floor, which
    a pause by the scheduler does not raise, and ways compared under the same load.

    Returns, for each of `evict_bytes`, the operations, slowest first (counts and seconds
    divided by `calls_per_step`, so per step of the call), and Python's dispatch of one replayed
    operation (`call_overhead`), which each replay's seconds hold once per call."""
    recorder = _Recorder()
    with recorder:
        call()
    replayed = {size: [] for size in evict_bytes}
    torch.set_flush_denormal(True)
    try:
        for key, count in recorder.calls.items():
            func, layout_args, layout_kwargs = recorder.example[key]
            layouts = [leaf for leaf in tree_leaves((layout_args, layout_kwargs)) if isinstance(leaf, _Layout)]
            size = max(sum(layout.nbytes() for layout in layouts), 1)
            replays = {}
            for evict in evict_bytes:
                copies = [tree_map(lambda a: a.fresh() if isinstance(a, _Layout) else a, (layout_args, layout_kwargs))
                          for _ in range(min(-(-evict // size), MAX_COPIES) if evict else 1)]
                replays[evict] = functools.partial(_replay, func, itertools.cycle(copies))
            timings = collections.defaultdict(list)
            with torch.no_grad():
                for _ in range(REPEATS):
                    for evict, replay in replays.items():
                        timings[evict].append(per_call(replay, seconds / REPEATS / len(evict_bytes)))
            shapes = [layout.shape for layout in layouts]
            for evict in evict_bytes:
                replayed[evict].append(Replayed(func.overloadpacket.__name__, shapes, count / calls_per_step, min(timings[evict]) * count / calls_per_step))
    finally:
        torch.set_flush_denormal(False)  # torch's default
    return {evict: sorted(ops, key=lambda op: -op.seconds) for evict, ops in replayed.items()}, call_overhead(0.2)


def _replay(func, turn: Iterator[tuple]) -> None:
    """One call of the operation on the next copy of its arguments."""
    args, kwargs = next(turn)
    func(*args, **kwargs)
