"""Training tokens per second of the seqtasks trainer at the paper's toy-task configuration.

Each core is built as in Table 9 of the Feedback Transformer paper (4 layers, d = 256, FF 4d,
4 heads, span 100, BPTT 64, dropout 0.2; lstm: 4 layers of 256) inside the real trainer
(seqtasks.train.Run on random_walk, batch 32 rows): a timed update is exactly what training
runs: the next (64, 32) block of the stream with memory carried, forward, cross-entropy on the
targets, backward, gradient clip 0.1, Adam. One untimed warm-up update, then updates until
`--seconds` have passed (at least 2); tokens/s = 64 * 32 * updates / seconds. The cores run one
after another in one process, side by side in one table, on `--threads` torch threads (default
2, this machine's cores; pin it the same when comparing runs).

For scale: the authors' implementation trains its Feedback Transformer at about 700 tokens/s
and its Transformer at about 3,900 at this configuration. The target: feedback >= 1,400
tokens/s (2x theirs); the last line says PASS or FAIL.

    python benchmarks/seqtasks.py                        # feedback, transformer, lstm; ~2 minutes
    python benchmarks/seqtasks.py --cores feedback --seconds 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import cpu_model  # noqa: E402
from seqtasks.config import SeqConfig  # noqa: E402
from seqtasks.train import Run  # noqa: E402

AUTHORS = {"feedback": 700, "transformer": 3900}  # tokens/s of the authors' implementation
TARGET = 1400  # feedback tokens/s: 2x the authors'
PAPER = dict(d_model=256, n_layers=4, n_heads=4, span=100, d_ff=0, dropout=0.2, bptt=64, lr=1e-4, grad_clip=0.1, warmup=1000)


def measure(core: str, batch: int, seconds: float, device: str) -> dict:
    """Updates of the trainer for `core`; returns tokens/s and seconds per update."""
    config = SeqConfig(
        task="random_walk", core=core, preset="paper", device=device, batch_size=batch,
        n_train=4 * batch, n_valid=batch, n_test=batch, **PAPER,
    )
    with tempfile.TemporaryDirectory() as folder:
        run = Run(config, {}, Path(folder))
        run.step()  # warm-up
        sync = torch.cuda.synchronize if run.device.type == "cuda" else (lambda: None)
        sync()
        updates, start = 0, time.perf_counter()
        while updates < 2 or time.perf_counter() - start < seconds:
            run.step()
            updates += 1
        sync()
        elapsed = time.perf_counter() - start
    tokens = config.bptt * batch * updates
    params = sum(p.numel() for p in run.model.parameters())
    return {"core": core, "tokens_per_s": tokens / elapsed, "s_per_update": elapsed / updates, "updates": updates, "params": params}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", nargs="+", default=["feedback", "transformer", "lstm"])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0, help="timed seconds per core")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_model()}, torch {torch.__version__}, {args.threads} thread(s), device {args.device}, batch {args.batch}, BPTT 64")
    rows = [measure(core, args.batch, args.seconds, args.device) for core in args.cores]
    print("| core | params | tokens/s | s/update | vs authors' |")
    print("|---|---|---|---|---|")
    for r in rows:
        theirs = AUTHORS.get(r["core"])
        versus = f"{r['tokens_per_s'] / theirs:.2f}x" if theirs else "-"
        print(f"| {r['core']} | {r['params'] / 1e6:.2f}M | {r['tokens_per_s']:,.0f} | {r['s_per_update']:.2f} | {versus} |")
    speed = {r["core"]: r["tokens_per_s"] for r in rows}
    if "feedback" in speed and "transformer" in speed:
        print(f"feedback / transformer: {speed['feedback'] / speed['transformer']:.2f} (authors': {AUTHORS['feedback'] / AUTHORS['transformer']:.2f})")
    if "feedback" in speed:
        verdict = "PASS" if speed["feedback"] >= TARGET else "FAIL"
        print(f"{verdict}: feedback {speed['feedback']:,.0f} tokens/s, target >= {TARGET:,}")


if __name__ == "__main__":
    main()
