"""Whether bfloat16 would pay in the compiled Feedback step on this CPU: its matrix products,
timed in float32 and in bfloat16 in one run.

The compiled step (agents/cores/feedback/csrc/feedback_step.cpp) computes in float32 or float64; a bf16
call runs the Python step instead (docs/cores.md). Its products are one step's, a few dozen rows
(B envs) each, and the learning pass's per-call products (T B rows). For each shape, at the A2C
CPU preset's sizes (d_model 64, feed-forward 256, B 64, T 32) and Table 9's (d 256, ff 1024,
B 32, T 100), this times torch.addmm in both dtypes, interleaved round by round
(benchmarks/targets.py), and prints bfloat16's time over float32's: below 1, bfloat16 pays.

    python benchmarks/bf16_products.py --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.frame.machine import cpu_model, load_line  # noqa: E402
from benchmarks.targets import interleaved, per_call  # noqa: E402

# (what, rows, in, out): a step's products, then a call's
SHAPES = [
    ("CPU preset, a step: query / output (B 64, d 64)", 64, 64, 64),
    ("CPU preset, a step: feed-forward in (d 64 -> 256)", 64, 64, 256),
    ("CPU preset, a call: T B = 2048 rows, d 64", 2048, 64, 64),
    ("Table 9, a step: query / output (B 32, d 256)", 32, 256, 256),
    ("Table 9, a step: feed-forward in (d 256 -> 1024)", 32, 256, 1024),
    ("Table 9, a call: T B = 3200 rows, d 256", 3200, 256, 256),
]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def seconds_per_product(rows: int, fan_in: int, fan_out: int, dtype: torch.dtype, seconds: float) -> float:
    """Seconds per addmm(bias, x (rows, in), w (in, out)) in `dtype`."""
    x, w, bias = (torch.randn(*shape).to(dtype) for shape in ((rows, fan_in), (fan_in, fan_out), (fan_out,)))
    return per_call(lambda: torch.addmm(bias, x, w), seconds)


def main(argv=None) -> dict[str, float]:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=0.5, help="per shape, dtype and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    times = {(what, name): [] for what, *_ in SHAPES for name in DTYPES}
    for name in interleaved(list(DTYPES), args.rounds):
        for what, rows, fan_in, fan_out in SHAPES:
            times[what, name].append(seconds_per_product(rows, fan_in, fan_out, DTYPES[name], args.seconds))
    print(f"{cpu_model()}; {load_line()}; torch {torch.__version__}, {args.threads} thread(s), {args.rounds} interleaved rounds; "
          f"oneDNN's CPU capability: {torch.backends.cpu.get_cpu_capability()}")
    print("| product | float32 (us) | bfloat16 (us) | bfloat16 / float32 |")
    print("|---|---|---|---|")
    ratios = {}
    for what, *_ in SHAPES:
        f32, bf16 = (statistics.median(times[what, name]) for name in DTYPES)
        ratios[what] = bf16 / f32
        print(f"| {what} | {1e6 * f32:.1f} | {1e6 * bf16:.1f} | {ratios[what]:.2f} |")
    return ratios


if __name__ == "__main__":
    main()
