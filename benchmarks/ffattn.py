"""Seconds per training update of feed-forward attention on long sequences: the dense reference
(seqtasks.ffattn.dense_pool) against the chunked pass the model trains with (chunked_pool).

An update is what a Raffel & Ellis run does: a batch of 100 adding-problem sequences of lengths
L .. 1.1 L (left-padded to the longest), forward, squared error, backward, an SGD step (Nesterov
momentum 0.9, lr 1e-3, the paper preset's optimiser); D = 100, 2 input channels. Both sides are
FeedForwardAttention models of the same initialisation that differ only in how c is computed.
Each (side, L) takes one untimed warm-up update, then all are timed interleaved: `--rounds`
rounds, each giving every (side, L) a slice of `--seconds` / `--rounds` (updates until the slice
has passed, at least one), every other round in reverse order, time and updates summed. A change
in load over the run so hits both sides alike. `--threads` torch threads (default 1, as the
experiments train).

Dense is skipped at an L where its update would need more than `--dense-memory-mb`: at its peak
it holds about DENSE_TENSORS (B, 1.1 L, D) float32 tensors (measured as below: 126, 257 and
1,284 MB at L = 1,000, 2,000 and 10,000, where one is 42, 84 and 420 MB). Peak memory per
update is measured in a fresh process per (side, L): how far one update raises its resident set
(VmHWM after resetting it through /proc/self/clear_refs, less VmRSS before; Linux only).
`padded s/batch` is Sequences.padded making one batch, the one step of the data path that grows
with L.

The target is a ratio within this run: chunked / dense updates per second at L = 2,000 >= 4. On
the shared 2-core AMD EPYC (load 3.5-4.6 from training runs) it measured 6-11; 4 leaves room for
a busier machine. `--check` exits 1 unless it passes. `--sweep-chunks` also times the chunked
model at L = 2,000 for each given chunk size (how seqtasks.ffattn.DEFAULT_CHUNK was chosen).

    python benchmarks/ffattn.py                           # L = 1,000, 2,000, 10,000; ~3 minutes
    python benchmarks/ffattn.py --lengths 2000 --seconds 10 --check
    python benchmarks/ffattn.py --lengths 2000 --sweep-chunks 16 32 64 128 256 512 --no-memory
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.frame.machine import cpu_model, load_line  # noqa: E402
from benchmarks.targets import Verdict, interleaved, ratio_target, report  # noqa: E402
from seqtasks.ffattn import DEFAULT_CHUNK, FeedForwardAttention, dense_pool  # noqa: E402
from seqtasks.tasks.long_term import LongTermTask  # noqa: E402

TARGET = 4.0  # chunked / dense updates/s at L = TARGET_LENGTH, both measured in this run
TARGET_LENGTH = 2000
DENSE_TENSORS = 3.1  # (B, 1.1 L, D) float32 tensors the dense update holds at its peak (measured: 3.0 - 3.06)
HIDDEN = 100


def adding_batch(length: int, batch: int):
    """`batch` adding-problem sequences of lengths L .. 1.1 L, as Sequences."""
    return LongTermTask("adding", length, variable_length=True).generate(np.random.default_rng(0), batch, "train")


def tensors(sequences) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole set as one left-padded batch: x (B, L, C), lengths (B,), targets (B,)."""
    x, lengths = sequences.padded(np.arange(len(sequences)))
    return torch.from_numpy(x), torch.from_numpy(lengths), torch.from_numpy(sequences.targets)


class Trainer:
    """One side: a model, its optimiser and a fixed batch; `update()` is one training update."""

    def __init__(self, dense: bool, model: FeedForwardAttention, batch: tuple):
        self.dense, self.model, self.batch = dense, model, batch
        self.optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, nesterov=True)

    def update(self) -> None:
        x, lengths, y = self.batch
        self.optimizer.zero_grad(set_to_none=True)
        if self.dense:
            predictions = self.model.head(dense_pool(x, lengths, *self.model.pool_weights(), self.model.negative_slope))
        else:
            predictions = self.model(x, lengths)  # chunked, as training runs it
        F.mse_loss(predictions, y).backward()
        self.optimizer.step()


def timed_slice(trainer: Trainer, seconds: float) -> tuple[int, float]:
    """Updates until `seconds` have passed (at least one): (updates, seconds taken)."""
    updates, start = 0, time.perf_counter()
    while updates < 1 or time.perf_counter() - start < seconds:
        trainer.update()
        updates += 1
    return updates, time.perf_counter() - start


def seconds_per_update(trainers: dict, seconds: float, rounds: int) -> dict:
    """Each trainer's seconds per update, after a warm-up update, timed interleaved."""
    for trainer in trainers.values():
        trainer.update()
    updates, elapsed = dict.fromkeys(trainers, 0), dict.fromkeys(trainers, 0.0)
    for key in interleaved(list(trainers), rounds):
        n, t = timed_slice(trainers[key], seconds / rounds)
        updates[key] += n
        elapsed[key] += t
    return {key: elapsed[key] / updates[key] for key in trainers}


def dense_memory_mb(length: int, batch: int) -> float:
    """The dense update's estimated peak: DENSE_TENSORS (B, 1.1 L, D) float32 tensors."""
    return DENSE_TENSORS * batch * 1.1 * length * HIDDEN * 4 / 2**20


def _status_mb(field: str) -> float:
    """A memory line of /proc/self/status (VmRSS: resident now, VmHWM: its peak), in MB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 2**10


def peak_memory_mb(dense: bool, length: int, batch: int, chunk: int) -> float:
    """Run in a fresh process: how far one update raises the resident set above where it
    started, in MB. A small update first loads every code path the big one takes."""
    small = Trainer(dense, FeedForwardAttention(2, HIDDEN, chunk=chunk), tensors(adding_batch(20, batch)))
    small.update()
    trainer = Trainer(dense, small.model, tensors(adding_batch(length, batch)))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the resident set now
    before = _status_mb("VmRSS")
    trainer.update()
    return _status_mb("VmHWM") - before


def peak_memory_in_child(dense: bool, length: int, batch: int, chunk: int, threads: int) -> float:
    """peak_memory_mb in a fresh Python process (its errors go to this one's stderr)."""
    code = (f"import torch; torch.set_num_threads({threads}); from benchmarks.ffattn import peak_memory_mb; "
            f"print(peak_memory_mb({dense}, {length}, {batch}, {chunk}))")
    return float(subprocess.run([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True).stdout)


def padded_seconds(sequences, repeats: int = 5) -> float:
    """Sequences.padded making the whole set into one batch: the fastest of `repeats`, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        sequences.padded(np.arange(len(sequences)))
        best = min(best, time.perf_counter() - start)
    return best


def targets(dense: dict[int, float], chunked: dict[int, float]) -> list[Verdict]:
    """The verdict on this run's updates per second (by L) of each side."""
    return [ratio_target(f"chunked / dense updates/s at L = {TARGET_LENGTH:,}", chunked.get(TARGET_LENGTH), dense.get(TARGET_LENGTH), TARGET,
                         f"needs --lengths {TARGET_LENGTH} with dense run there")]


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 2000, 10000], help="sequence lengths L")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=DEFAULT_CHUNK, help="the chunked model's steps per chunk")
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per side and L, over all rounds")
    parser.add_argument("--rounds", type=int, default=4, help="timed slices per side and L, interleaved with the others'")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--dense-memory-mb", type=float, default=2048, help="skip dense where its update would need more")
    parser.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True, help="measure peak memory per update")
    parser.add_argument("--sweep-chunks", type=int, nargs="*", default=[], help=f"also time these chunk sizes at L = {TARGET_LENGTH:,}")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the target passes")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_model()}, torch {torch.__version__}, {args.threads} thread(s), batch {args.batch}, D {HIDDEN}, chunk {args.chunk}, "
          f"{args.rounds} interleaved rounds; {load_line()}")

    torch.manual_seed(0)
    model = FeedForwardAttention(2, HIDDEN, chunk=args.chunk)
    sequences = {length: adding_batch(length, args.batch) for length in args.lengths}
    trainers = {}
    for length in args.lengths:
        if dense_memory_mb(length, args.batch) <= args.dense_memory_mb:
            trainers["dense", length] = Trainer(True, copy.deepcopy(model), tensors(sequences[length]))
        else:
            print(f"dense skipped at L = {length:,}: about {dense_memory_mb(length, args.batch):,.0f} MB > --dense-memory-mb {args.dense_memory_mb:g}")
        trainers["chunked", length] = Trainer(False, copy.deepcopy(model), tensors(sequences[length]))
    seconds = seconds_per_update(trainers, args.seconds, args.rounds)
    dense = {length: s for (side, length), s in seconds.items() if side == "dense"}
    chunked = {length: s for (side, length), s in seconds.items() if side == "chunked"}

    def peak(side: str, length: int) -> str:
        if not args.memory or (side, length) not in trainers or not Path("/proc/self/clear_refs").exists():
            return "-"
        return f"{peak_memory_in_child(side == 'dense', length, args.batch, args.chunk, args.threads):,.0f}"

    print("| L | dense s/update | chunked s/update | speed-up | dense peak MB | chunked peak MB | padded s/batch |")
    print("|---|---|---|---|---|---|---|")
    for length in args.lengths:
        d = f"{dense[length]:.3f}" if length in dense else "skipped"
        speedup = f"{dense[length] / chunked[length]:.1f}x" if length in dense else "-"
        print(f"| {length:,} | {d} | {chunked[length]:.3f} | {speedup} | {peak('dense', length)} | {peak('chunked', length)} "
              f"| {padded_seconds(sequences[length]):.4f} |")

    if args.sweep_chunks:
        batch = tensors(adding_batch(TARGET_LENGTH, args.batch))
        sweep = {chunk: Trainer(False, FeedForwardAttention(2, HIDDEN, chunk=chunk), batch) for chunk in args.sweep_chunks}
        sweep_seconds = seconds_per_update(sweep, args.seconds, args.rounds)
        print(f"\n| chunk (L = {TARGET_LENGTH:,}) | s/update |")
        print("|---|---|")
        for chunk, s in sweep_seconds.items():
            print(f"| {chunk} | {s:.3f} |")
    print(f"at the end: {load_line()}")
    return report(targets({k: 1 / s for k, s in dense.items()}, {k: 1 / s for k, s in chunked.items()}), args.check)


if __name__ == "__main__":
    sys.exit(main())
