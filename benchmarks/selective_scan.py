"""Which way the scan with per-step decays (Mamba's) should run a learning call on this CPU: one
step after another, or by doubling rounds, timed forward and backward over the widths of a step.

agents/cores/linear_scan.py runs h_t = a_t h_{t-1} + v_t (a_t one decay per step, env and unit)
two ways: `_stepwise`, one multiply-add a step written in place (two passes over a step's memory,
and a call of Python a step), and `_chunks`, Hillis and Steele's doubling rounds over chunks of
CHUNK steps (about ten passes over a chunk's memory a round, log2(CHUNK) rounds, few calls). The
calls cost the same at any width and the passes grow with it, so the rounds could win only where a
step is narrow; linear_scan runs stepwise on the devices in STEPWISE_DEVICES (the CPU).

Each width is B envs (64, as the CPU preset's) of N real units (Mamba's default: E N = 128 x 16 =
2,048 a layer), at T = 33 and 129 steps (an episode of the recall task at L = 32 and 128), decays
in (0, 1), episode starts with probability 1/32 a step; a learning pass is the scan, sum(states *
a fixed random tensor), backward (gradients to the decays and the inputs). Both ways are timed
`--repeats` times, interleaved (benchmarks/targets.py), each sample the mean of calls over
`--seconds`; the table gives the medians. The target (--check): at every width and T, the way
linear_scan picks on this machine's CPU takes at most TARGET_SLOWDOWN times the faster way's time,
both from this run.

    python benchmarks/selective_scan.py                            # about 3 minutes on a 2-core EPYC
    python benchmarks/selective_scan.py --batch 1 --units 16 256 1024   # the narrowest steps
    python benchmarks/selective_scan.py --json out.json --check
    python benchmarks/selective_scan.py --train mamba ffm lru --units 2048 --lengths 129   # and whole A2C updates

`--train CORE ...` also times whole A2C updates (acting and learning, train_a2c.py's CPU preset on
the recall task at L = 128, the frames-to-solve sweep's settings) with each way, interleaved:
microseconds per env frame, after warm-up updates that fill the gradient window.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import torch

if __package__ in (None, ""):  # run as a script: the project root goes first on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.cores import linear_scan as scan_module  # noqa: E402
from benchmarks.targets import interleaved, per_call, ratio_target, report  # noqa: E402
from durable.records import write_json  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402

UNITS = [16, 64, 128, 512, 2048]  # N a step, B = 64 each: widths 1,024 to 131,072
LENGTHS = [33, 129]
BATCH = 64
RESET_P = 1 / 32
TARGET_SLOWDOWN = 1.25  # the picked way's time at most this times the faster way's
TRAIN_ARGS = ("--env memory_length --env-opt length=128,show_time=false --preset cpu --bptt episode --no-previous-inputs "
              "--seed 0 --threads 1").split()  # the frames-to-solve sweep's A2C runs at L = 128
TRAIN_UPDATES = 4  # updates a sample
WAYS = {"stepwise": ("cpu",), "doubling": ()}  # STEPWISE_DEVICES that make linear_scan run each way on a CPU


def learning_pass(way: str, steps: int, units: int, batch: int):
    """A call for timing: the scan run `way`, a weighted sum of its states, backward."""
    generator = torch.Generator().manual_seed(steps * units)
    decay = torch.rand(steps, batch, units, generator=generator).requires_grad_()
    inputs = torch.randn(steps, batch, units, generator=generator).requires_grad_()
    first = torch.rand(steps, batch, generator=generator) < RESET_P
    state, weight = torch.randn(batch, units, generator=generator), torch.randn(steps, batch, units, generator=generator)

    def call():
        with mock.patch.object(scan_module, "STEPWISE_DEVICES", WAYS[way]):
            (scan_module.linear_scan(decay, inputs, first, state) * weight).sum().backward()
        decay.grad = inputs.grad = None

    return call


def training_rates(core: str, repeats: int) -> dict[str, list[float]]:
    """{way: microseconds per env frame of TRAIN_UPDATES A2C updates, one sample a repeat}, the
    ways interleaved in one trainer (the same weights and envs go on from sample to sample)."""
    import tempfile

    from agents.command_line import make_parser, make_trainer
    from agents.learners.train import Trainer

    rates = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as run_dir:
        parser = make_parser(Trainer, "")
        trainer = make_trainer(Trainer, parser.parse_args([*TRAIN_ARGS, "--core", core, "--run-dir", run_dir]), parser)
        try:
            frames = TRAIN_UPDATES * trainer.config.num_envs * trainer.config.rollout
            for _ in range(2 * TRAIN_UPDATES):  # the window (an episode of 129 steps) filled
                trainer.update()
            for way in interleaved(list(WAYS), repeats):
                with mock.patch.object(scan_module, "STEPWISE_DEVICES", WAYS[way]):
                    started = time.perf_counter()
                    for _ in range(TRAIN_UPDATES):
                        trainer.update()
                    rates[way].append((time.perf_counter() - started) / frames * 1e6)
        finally:
            trainer.close()
    return rates


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--units", nargs="+", type=int, default=UNITS, help="N units a step (the width is B N)")
    parser.add_argument("--lengths", nargs="+", type=int, default=LENGTHS, help="T of the learning calls")
    parser.add_argument("--batch", type=int, default=BATCH, help="B envs")
    parser.add_argument("--seconds", type=float, default=0.3, help="timed per sample, after one untimed call")
    parser.add_argument("--repeats", type=int, default=5, help="samples per way, interleaved; the median is reported")
    parser.add_argument("--json", default=None, help="also write the measurements to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the picked way is within the target everywhere")
    parser.add_argument("--train", nargs="+", default=[], metavar="CORE", help="also time whole A2C updates of these cores with each way")
    args = parser.parse_args(argv)
    for flag in ("units", "lengths"):
        if min(getattr(args, flag)) < 1:
            parser.error(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    if args.batch < 1 or args.repeats < 1 or args.seconds <= 0:
        parser.error(f"--batch and --repeats must be >= 1 and --seconds > 0, got {args.batch}, {args.repeats}, {args.seconds}")
    torch.set_num_threads(1)
    began = time.perf_counter()
    cells = [(steps, units) for steps in args.lengths for units in args.units]
    calls = {(cell, way): learning_pass(way, *cell, args.batch) for cell in cells for way in WAYS}
    samples = {key: [] for key in calls}
    for key in interleaved(list(calls), args.repeats):
        samples[key].append(per_call(calls[key], args.seconds))
    times = {key: statistics.median(values) for key, values in samples.items()}

    machine = f"{cpu_model()}, {load_line()}; python {platform.python_version()}, torch {torch.__version__}, 1 thread"
    print(f"{machine}\nB = {args.batch}, float32, forward + backward; median of {args.repeats} interleaved samples of >= {args.seconds:g} s; "
          f"linear_scan.STEPWISE_DEVICES = {scan_module.STEPWISE_DEVICES}\n")
    print("| T | width B N | stepwise ms | doubling ms | doubling / stepwise | linear_scan picks |\n|---:|---:|---:|---:|---:|---|")
    rows, worst = [], None
    picked = "stepwise" if "cpu" in scan_module.STEPWISE_DEVICES else "doubling"
    for steps, units in cells:
        stepwise, doubling = times[(steps, units), "stepwise"], times[(steps, units), "doubling"]
        width = args.batch * units
        share = min(stepwise, doubling) / times[(steps, units), picked]  # 1: the picked way is the faster
        worst = share if worst is None else min(worst, share)
        rows.append({"steps": steps, "width": width, "stepwise_seconds": stepwise, "doubling_seconds": doubling, "picked": picked})
        print(f"| {steps} | {width:,} | {stepwise * 1e3:.2f} | {doubling * 1e3:.2f} | {doubling / stepwise:.2f} | {picked} |")
    print()
    training = {}
    for core in args.train:
        training[core] = training_rates(core, args.repeats)
        stepwise, doubling = (statistics.median(training[core][way]) for way in ("stepwise", "doubling"))
        print(f"A2C with {core} at L = 128: {stepwise:.0f} us a frame stepwise, {doubling:.0f} doubling ({doubling / stepwise:.2f}x)")
    verdict = ratio_target("faster way / the way linear_scan picks, the worst cell", worst, 1.0 if worst is not None else None,
                           1 / TARGET_SLOWDOWN, "nothing measured")
    status = report([verdict], args.check)
    if args.json:
        write_json(args.json, {"command": " ".join(["python", "benchmarks/selective_scan.py", *(sys.argv[1:] if argv is None else argv)]),
                               "machine": machine, "batch": args.batch, "stepwise_devices": list(scan_module.STEPWISE_DEVICES), "rows": rows,
                               "samples": {f"T{steps} N{units} {way}": values for ((steps, units), way), values in samples.items()},
                               "training_us_per_frame": training, "train_args": " ".join(TRAIN_ARGS),
                               "target": {"name": verdict.name, "ratio": verdict.ratio, "at_least": verdict.at_least, "passed": verdict.passed},
                               "wall_seconds": round(time.perf_counter() - began, 1)}, indent=1)
        print(f"written to {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
