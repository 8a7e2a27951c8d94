"""Training tokens per second of the seqtasks trainer at the paper's toy-task configuration.

Each core is built as in Table 9 of the Feedback Transformer paper (4 layers, d = 256, FF 4d,
4 heads, span 100, BPTT 64, dropout 0.2; lstm: 4 layers of 256) inside the real trainer
(seqtasks.train.Run on random_walk, batch 32 rows): a timed update is exactly what training
runs: the next (64, 32) block of the stream with memory carried, forward, cross-entropy on the
targets, backward, gradient clip 0.1, Adam. All cores are built in one process and take one
untimed warm-up update each; then they are timed interleaved: `--rounds` rounds, each giving
every core a slice of `--seconds` / `--rounds` (updates until the slice has passed, at least
one), every other round in reverse order, time and updates summed per core; tokens/s = 64 * 32
* updates / seconds. A change in load over the run so hits every core alike. `--threads` torch
threads (default 2, this machine's cores).

The target is a ratio within this run: feedback tokens/s >= 0.3 x transformer tokens/s (the
feedback core steps through time one token at a time, the transformer takes the block at once).
For context only, not a target: the authors' code (facebookresearch/transformer-sequential),
timed side by side on a 2-core AMD EPYC at this configuration, gave feedback / transformer
0.18-0.26 (734-885 and 3,133-3,386 tokens/s). `--check` exits 1 unless the target passes.

    python benchmarks/seqtasks.py                        # feedback, transformer, lstm; ~2 minutes
    python benchmarks/seqtasks.py --cores feedback transformer --seconds 20 --check
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import cpu_model, load_line  # noqa: E402
from benchmarks.targets import Verdict, interleaved, ratio_target, report  # noqa: E402
from seqtasks.config import SeqConfig  # noqa: E402
from seqtasks.train import Run  # noqa: E402

TARGET = 0.3  # feedback / transformer tokens/s, both measured in this run
# Context, not a target: the authors' code side by side on a 2-core AMD EPYC, at PAPER, batch 32.
AUTHORS = "authors' code (transformer-sequential), 2-core AMD EPYC: feedback / transformer 0.18-0.26 (734-885 / 3,133-3,386 tokens/s)"
PAPER = dict(d_model=256, n_layers=4, n_heads=4, span=100, d_ff=0, dropout=0.2, bptt=64, lr=1e-4, grad_clip=0.1, warmup=1000)


def build(core: str, batch: int, device: str, folder: Path) -> Run:
    """The trainer for `core` at the paper's configuration, after one untimed warm-up update."""
    config = SeqConfig(
        task="random_walk", core=core, preset="paper", device=device, batch_size=batch,
        n_train=4 * batch, n_valid=batch, n_test=batch, **PAPER,
    )
    run = Run(config, {}, folder / core)
    run.step()
    return run


def timed_slice(run: Run, seconds: float) -> tuple[int, float]:
    """Updates until `seconds` have passed (at least one): (updates, seconds taken)."""
    sync = torch.cuda.synchronize if run.device.type == "cuda" else (lambda: None)
    sync()
    updates, start = 0, time.perf_counter()
    while updates < 1 or time.perf_counter() - start < seconds:
        run.step()
        updates += 1
    sync()
    return updates, time.perf_counter() - start


def measure(cores: list[str], batch: int, seconds: float, rounds: int, device: str) -> list[dict]:
    """Each core's tokens/s, seconds per update and parameters, timed interleaved."""
    with tempfile.TemporaryDirectory() as folder:
        runs = {core: build(core, batch, device, Path(folder)) for core in cores}
        updates, elapsed = dict.fromkeys(cores, 0), dict.fromkeys(cores, 0.0)
        for core in interleaved(cores, rounds):
            n, t = timed_slice(runs[core], seconds / rounds)
            updates[core] += n
            elapsed[core] += t
    return [
        {"core": core, "tokens_per_s": PAPER["bptt"] * batch * updates[core] / elapsed[core], "s_per_update": elapsed[core] / updates[core],
         "updates": updates[core], "params": sum(p.numel() for p in runs[core].model.parameters())}
        for core in cores
    ]


def targets(speed: dict[str, float]) -> list[Verdict]:
    """The verdicts on this run's tokens/s per core."""
    return [ratio_target("feedback / transformer tokens/s", speed.get("feedback"), speed.get("transformer"), TARGET,
                         "needs --cores feedback transformer")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", nargs="+", default=["feedback", "transformer", "lstm"])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0, help="timed seconds per core, over all rounds")
    parser.add_argument("--rounds", type=int, default=6, help="timed slices per core, interleaved with the other cores'")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the target passes")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_model()}, torch {torch.__version__}, {args.threads} thread(s), device {args.device}, batch {args.batch}, BPTT 64, "
          f"{args.rounds} interleaved rounds; {load_line()}")
    rows = measure(args.cores, args.batch, args.seconds, args.rounds, args.device)
    print("| core | params | tokens/s | s/update | updates |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['core']} | {r['params'] / 1e6:.2f}M | {r['tokens_per_s']:,.0f} | {r['s_per_update']:.2f} | {r['updates']} |")
    print(f"context, not a target: {AUTHORS}")
    print(f"at the end: {load_line()}")
    return report(targets({r["core"]: r["tokens_per_s"] for r in rows}), args.check)


if __name__ == "__main__":
    sys.exit(main())
