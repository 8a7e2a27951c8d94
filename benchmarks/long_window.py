"""Does a long gradient window cost its length and no more? The learning pass per processed step
with a window of K = 1,024 steps against K = T = 32, for the Feedback core and the LSTM, in one run.

At the A2C CPU preset (B 64 envs; Feedback d_model 64, 2 layers, 4 heads, span 64; LSTM 1 x 128),
a learning pass is one core call of K steps with gradients from a state holding a full span, then
the backward of a loss over its outputs: what a trainer with --bptt K recomputes each update
(agents/learners/window.py). No episode ends inside the call (first is all False), as on episodes
of at least K steps, where packing (episode_packing.py) has nothing to shorten. Interleaved rounds
(benchmarks/targets.py); the median round. The process keeps freed memory as training does
(agents/runtime/freed_memory.py): a K = 1,024 call's tape is about a GiB at these sizes.

    python benchmarks/long_window.py                       # K = 32 and 1,024; a few minutes
    python benchmarks/long_window.py --windows 32 256 1024 --rounds 5

A row "feedback, K = 32, wide" is the first K's call with its buffers as wide as the last K's
(capacity S + K_last slots instead of S + max(K, 64)): the same steps and the same work, only the
buffers' rows farther apart. Before the compiled step read long calls' windows from blocks
(agents/cores/feedback/core.py: BLOCKED_FROM) it cost about what the long call cost per step:
that extra time was the layout's (each (env, head, element) row of the keys, values and their
gradients a page or more apart), not the length's. Now both read from blocks.

Target (issue 49): per processed step, K = 1,024 within 1.2x of K = 32 for both cores.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.cores import make_core  # noqa: E402
from agents.cores.feedback import core as feedback_core  # noqa: E402
from agents.runtime.freed_memory import keep_freed_memory  # noqa: E402
from benchmarks.feedback_compiled import BATCH, FEEDBACK, INPUT_DIM, LSTM  # noqa: E402
from benchmarks.targets import interleaved  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402

TARGET = 1.2


def main(argv=None) -> dict[tuple[str, int], float]:
    """Seconds per processed step of the learning pass, per (core, K)."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", nargs="+", type=int, default=[32, 1024], help="K values; the first is the base (default: 32 1024)")
    parser.add_argument("--cores", nargs="+", choices=["feedback", "lstm"], default=["feedback", "lstm"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4096, help="processed steps per (core, K) per round (default: 4,096)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    kept = keep_freed_memory()
    torch.manual_seed(0)
    cores = {"feedback": make_core("feedback", INPUT_DIM, **FEEDBACK), "lstm": make_core("lstm", INPUT_DIM, **LSTM)}
    states = {}
    with torch.no_grad():  # a full span carried in
        for name in args.cores:
            span = FEEDBACK["span"]
            warm = torch.randn(span, BATCH, INPUT_DIM)
            _, states[name] = cores[name](warm, cores[name].initial_state(BATCH, "cpu"), torch.zeros(span, BATCH, dtype=torch.bool))
    inputs = {k: (torch.randn(k, BATCH, INPUT_DIM), torch.zeros(k, BATCH, dtype=torch.bool)) for k in args.windows}

    widest = FEEDBACK["span"] + max(args.windows[-1], 64)

    def learn(name: str, k: int | str) -> None:
        wide = k == "wide"
        x, first = inputs[args.windows[0] if wide else k]
        with widened(widest) if wide else contextlib.nullcontext():
            y, _ = cores[name](x, states[name], first)
        y.square().mean().backward()

    pairs = [(name, k) for name in args.cores for k in args.windows] + ([("feedback", "wide")] if "feedback" in args.cores else [])
    for pair in pairs:  # one untimed call each
        learn(*pair)
    per_step: dict[tuple[str, int], list[float]] = {pair: [] for pair in pairs}
    for name, k in interleaved(pairs, args.rounds):
        steps = args.windows[0] if k == "wide" else k
        calls = max(1, args.steps // steps)
        began = time.perf_counter()
        for _ in range(calls):
            learn(name, k)
        per_step[name, k].append((time.perf_counter() - began) / (calls * steps))
    median = {pair: statistics.median(times) for pair, times in per_step.items()}
    print(f"{cpu_model()}, torch {torch.__version__}, 1 thread, B {BATCH}, freed memory kept: {kept}; {load_line()}")
    print("| core | K | learning pass per processed step (ms) | against K = %d | rounds (ms) |\n|---|---|---|---|---|" % args.windows[0])
    for name, k in pairs:
        ratio = median[name, k] / median[name, args.windows[0]]
        rounds = ", ".join(f"{1e3 * t:.3f}" for t in per_step[name, k])
        label = f"{args.windows[0]}, wide ({widest:,} slots)" if k == "wide" else f"{k:,}"
        print(f"| {name} | {label} | {1e3 * median[name, k]:.3f} | {ratio:.2f}x | {rounds} |")
    for name in args.cores:
        ratio = median[name, args.windows[-1]] / median[name, args.windows[0]]
        print(f"{name}: K = {args.windows[-1]:,} / K = {args.windows[0]} per step {ratio:.2f} (target <= {TARGET}): "
              f"{'met' if ratio <= TARGET else 'missed'}")
    return median


@contextlib.contextmanager
def widened(capacity: int):
    """Feedback calls inside make buffers of `capacity` slots whatever their length (the "wide" row)."""
    normal = feedback_core.capacity_for
    feedback_core.capacity_for = lambda span, steps: max(capacity, normal(span, steps))
    try:
        yield
    finally:
        feedback_core.capacity_for = normal


if __name__ == "__main__":
    main()
