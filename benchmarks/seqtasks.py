"""Training tokens per second of the seqtasks trainer at the paper's toy-task configuration,
and, with --authors PATH, of the authors' own code beside it in the same run.

Each core is built as in Table 9 of the Feedback Transformer paper (4 layers, d = 256, FF 4d,
4 heads, span 100, BPTT 64, dropout 0.2; lstm: 4 layers of 256) inside the real trainer
(seqtasks.train.Run on random_walk, batch 32 rows): a timed update is exactly what training
runs: the next (64, 32) block of the stream with memory carried, forward, cross-entropy on the
targets, backward, gradient clip 0.1, Adam. All models are built in one process and take one
untimed warm-up update each; then they are timed interleaved: `--rounds` rounds, each giving
every model a slice of `--seconds` / `--rounds` (updates until the slice has passed, at least
one), every other round in reverse order, time and updates summed per model; tokens/s = 64 *
32 * updates / seconds. A change in load over the run so hits every model alike. `--threads`
torch threads (default 2, this machine's cores).

--authors PATH points at a checkout of facebookresearch/transformer-sequential OUTSIDE this
repository (CC BY-NC 4.0: none of it may enter it; benchmarks/authors.py imports it from PATH at
run time): their FeedbackTransformer (shared key/value projections) and TransformerSeq are built
at the same configuration and timed in the same rounds, on the same token blocks.

Targets, ratios within this run: feedback tokens/s >= 0.3 x our transformer's (the feedback
core steps through time one token at a time, the transformer takes the block at once); with
--authors, our feedback >= 2.5 x theirs and our transformer >= 1.0 x theirs. `--check` exits 1
unless the measured targets pass.

    python benchmarks/seqtasks.py                        # feedback, transformer, lstm; ~2 minutes
    python benchmarks/seqtasks.py --cores feedback transformer --seconds 20 --check
    git clone https://github.com/facebookresearch/transformer-sequential /tmp/transformer-sequential
    python benchmarks/seqtasks.py --cores feedback transformer --authors /tmp/transformer-sequential
    python benchmarks/seqtasks.py --cores feedback --authors /tmp/transformer-sequential --threads 1 --floor

--floor then gives our Feedback update's floor from its parts (benchmarks/feedback_compiled.py's
step_roofline: every ATen operation of an update replayed alone, the attention's loops at their
bandwidth bound) and, with --authors, the most our feedback / theirs could read here if our
update ran at that floor, and at its matrix products' alone: the bound on the 2.5x target.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments.frame.machine import cpu_model, load_line  # noqa: E402
from benchmarks.targets import Verdict, interleaved, ratio_target, report  # noqa: E402
from seqtasks.config import SeqConfig  # noqa: E402
from seqtasks.train import Run  # noqa: E402

TARGET = 0.3  # feedback / transformer tokens/s, both measured in this run
AUTHORS_TARGETS = {"feedback": 2.5, "transformer": 1.0}  # ours / the authors' tokens/s, measured side by side
PAPER = dict(d_model=256, n_layers=4, n_heads=4, span=100, d_ff=0, dropout=0.2, bptt=64, lr=1e-4, grad_clip=0.1, warmup=1000)
THEIRS = "authors' "  # the row-name prefix of the authors' models


def build(core: str, batch: int, device: str, folder: Path) -> Run:
    """The trainer for `core` at the paper's configuration, after one untimed warm-up update."""
    config = SeqConfig(
        task="random_walk", core=core, preset="paper", device=device, batch_size=batch,
        n_train=4 * batch, n_valid=batch, n_test=batch, **PAPER,
    )
    run = Run(config, {}, folder / core)
    run.step()
    return run


def build_authors(path: Path, core: str, ours: Run):
    """The authors' model `core` at PAPER, stepping through the token blocks of our run's
    training split, after one untimed warm-up update."""
    from benchmarks.authors import AuthorsRun
    from seqtasks.streams import TokenStream

    batch = ours.config.batch_size
    stream = TokenStream(ours.regime.splits["train"], batch, ours.device)
    vocab = max(len(ours.task.input_tokens), len(ours.task.output_tokens))  # theirs has one vocabulary for both
    run = AuthorsRun(path, core, PAPER, vocab, batch, stream, ours.config.device)
    run.step()
    return run


def timed_slice(step, device: torch.device, seconds: float) -> tuple[int, float]:
    """Calls of `step` until `seconds` have passed (at least one): (updates, seconds taken)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    updates, start = 0, time.perf_counter()
    while updates < 1 or time.perf_counter() - start < seconds:
        step()
        updates += 1
    sync()
    return updates, time.perf_counter() - start


def measure(cores: list[str], batch: int, seconds: float, rounds: int, device: str, authors: Path | None) -> list[dict]:
    """Tokens/s, seconds per update and parameters of each of our cores (and of the authors'
    feedback and transformer models, with `authors`), timed interleaved."""
    with tempfile.TemporaryDirectory() as folder:
        ours = {core: build(core, batch, device, Path(folder)) for core in cores}
        models = {core: run.model for core, run in ours.items()}
        steps = {core: run.step for core, run in ours.items()}
        for core in [core for core in cores if core in AUTHORS_TARGETS] if authors else []:
            theirs = build_authors(authors, core, ours[core])
            models[THEIRS + core], steps[THEIRS + core] = theirs.model, theirs.step
        names = list(steps)
        updates, elapsed = dict.fromkeys(names, 0), dict.fromkeys(names, 0.0)
        for name in interleaved(names, rounds):
            n, t = timed_slice(steps[name], torch.device(device), seconds / rounds)
            updates[name] += n
            elapsed[name] += t
    return [
        {"model": name, "tokens_per_s": PAPER["bptt"] * batch * updates[name] / elapsed[name], "s_per_update": elapsed[name] / updates[name],
         "updates": updates[name], "params": sum(p.numel() for p in models[name].parameters())}
        for name in names
    ]


def targets(speed: dict[str, float], authors: bool) -> list[Verdict]:
    """The verdicts on this run's tokens/s per model."""
    verdicts = [ratio_target("feedback / transformer tokens/s", speed.get("feedback"), speed.get("transformer"), TARGET,
                             "needs --cores feedback transformer")]
    for core, at_least in AUTHORS_TARGETS.items() if authors else []:
        verdicts.append(ratio_target(f"our {core} / the authors' {core} tokens/s", speed.get(core), speed.get(THEIRS + core), at_least,
                                     f"needs --cores {core}"))
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", nargs="+", default=["feedback", "transformer", "lstm"])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0, help="timed seconds per core, over all rounds")
    parser.add_argument("--rounds", type=int, default=6, help="timed slices per core, interleaved with the other cores'")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--authors", type=Path, default=None, metavar="PATH",
                        help="a checkout of facebookresearch/transformer-sequential outside this repository: time their models too")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the measured targets pass")
    parser.add_argument("--floor", action="store_true", help="then our feedback update's floor from its parts, and what it bounds")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.floor and ("feedback" not in args.cores or args.device != "cpu"):
        parser.error(f"--floor needs feedback among --cores and --device cpu, got --cores {' '.join(args.cores)} --device {args.device}")
    torch.set_num_threads(args.threads)
    print(f"machine: {cpu_model()}, torch {torch.__version__}, {args.threads} thread(s), device {args.device}, batch {args.batch}, BPTT 64, "
          f"{args.rounds} interleaved rounds; {load_line()}")
    rows = measure(args.cores, args.batch, args.seconds, args.rounds, args.device, args.authors)
    print("| model | params | tokens/s | s/update | updates |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['params'] / 1e6:.2f}M | {r['tokens_per_s']:,.0f} | {r['s_per_update']:.2f} | {r['updates']} |")
    speed = {r["model"]: r["tokens_per_s"] for r in rows}
    if THEIRS + "feedback" in speed and THEIRS + "transformer" in speed:
        print(f"context: the authors' feedback / transformer tokens/s here: {speed[THEIRS + 'feedback'] / speed[THEIRS + 'transformer']:.2f}")
    if args.floor:
        floor(args.batch, {r["model"]: r["s_per_update"] for r in rows})
    print(f"at the end: {load_line()}")
    return report(targets(speed, args.authors is not None), args.check)


def floor(batch: int, s_per_update: dict[str, float], replay_seconds: float = 0.05) -> None:
    """Our feedback update's floor from its parts, per step of its BPTT block (step_roofline), and,
    where the authors' feedback was timed, the most our / theirs could read with our update at
    that floor, and at its products' alone (the model's own arithmetic at ATen's rate).
    `replay_seconds`: each operation's timing (step_roofline)."""
    from benchmarks.feedback_compiled import attention_roofline, step_roofline

    steps, heads = PAPER["bptt"], PAPER["n_heads"]
    loops = attention_roofline(None, batch=batch, heads=heads, span=PAPER["span"], width=PAPER["d_model"] // heads,
                               layers=PAPER["n_layers"], steps=steps)
    with tempfile.TemporaryDirectory() as folder:
        run = build("feedback", batch, "cpu", Path(folder))
        parts = step_roofline(run.step, s_per_update["feedback"] / steps, ("bandwidth bound", loops), steps_per_call=steps,
                              replay_seconds=replay_seconds)
    theirs = s_per_update.get(THEIRS + "feedback")
    if theirs is not None:
        for way in ("warm", "out of L2"):
            products = steps * parts[way]["groups"]["products"]  # 0 where every product is within the replay's dispatch
            print(f"ours at its floor ({way}) would be {theirs / (steps * parts[way]['floor']):.2f}x the authors' feedback tokens/s, "
                  f"at its products' alone {f'{theirs / products:.2f}x' if products > 0 else 'without bound'} "
                  f"(measured: {theirs / s_per_update['feedback']:.2f}x; target {AUTHORS_TARGETS['feedback']}x)")


if __name__ == "__main__":
    sys.exit(main())
