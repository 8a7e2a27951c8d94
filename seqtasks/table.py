"""The Feedback Transformer paper's Table 1 at a CPU-sized scale, beside the paper's numbers.

    python -m seqtasks.table                      # all rows, feedback / transformer / lstm
    python -m seqtasks.table --rows random_walk --cores feedback transformer
    python -m seqtasks.table --quick              # a smoke run of seconds (tiny models, 3 updates)

Every run is `python -m seqtasks` with the cpu preset on one thread, and these changes (the
paper's task settings unless listed):
  model      d_model 64, 2 layers, 4 heads, span 100, no dropout (the paper: d 256, 4 layers,
             dropout 0.2); lstm: 2 layers of 64
  training   batch 32, BPTT 64, Adam lr 1e-3, warm-up 100, clip 1.0, at most 1000 updates and
             `--minutes` (default 2) minutes of training per run, validation every 200 updates
  data       2000 training episodes (counting up to 1000: 500), validation and test sets of
             100 (counting up to 1000: 32 and 64; copy / reverse are tested on length 400)
With 24 runs (8 rows x 3 cores), the full table takes about 24 x (minutes + evaluation) minutes
at most; the feedback runs use their whole time, transformer and lstm stop earlier. Scores are
the test metrics of the best validated weights. The table is written to `--output` (markdown),
each run's folder under `--runs`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from seqtasks.config import resolve_config
from seqtasks.train import Run

# row -> (task settings, metrics reported, paper's Transformer, Feedback, LSTM scores in %)
ROWS = {
    "copy": (dict(task="copy"), ("accuracy", "sequence_accuracy"), "59.1 / 6.2", "76.2 / 23.6", ""),
    "reverse": (dict(task="reverse"), ("accuracy", "sequence_accuracy"), "50.2 / 5.9", "74.8 / 29.2", ""),
    "counting_50": (dict(task="counting", max_count=50), ("accuracy",), "99.6", "99.7", ""),
    "counting_1000": (dict(task="counting", max_count=1000, n_train=500, n_valid=32, n_test=64), ("accuracy",), "82.4", "95.3", ""),
    "random_walk": (dict(task="random_walk"), ("accuracy",), "68", "100", ""),
    # Not in the paper: the random walk at a size a CPU learns in minutes (4x4, 30 actions a walk).
    "random_walk_4x4": (dict(task="random_walk", grid_size=4, walk_length=30), ("accuracy",), "-", "-", ""),
    "algorithmic_3": (dict(task="algorithmic", n_vars=3), ("accuracy",), "33.7", "99.1", "82.8"),
    "algorithmic_5": (dict(task="algorithmic", n_vars=5), ("accuracy",), "37.5", "92.6", "32.1"),
}
CORES = ("feedback", "transformer", "lstm")
SCALE = dict(
    preset="cpu", threads=1, device="cpu", d_model=64, n_layers=2, n_heads=4, span=100, dropout=0.0, batch_size=32,
    bptt=64, lr=1e-3, warmup=100, grad_clip=1.0, max_updates=1000, eval_every=200, patience=0,
    n_train=2000, n_valid=100, n_test=100,
)
QUICK = dict(
    d_model=16, n_layers=1, n_heads=2, span=16, batch_size=4, bptt=16, max_updates=3, eval_every=3, warmup=1,
    n_train=8, n_valid=4, n_test=4, copy_length=5, copy_test_length=10, max_count=8, walk_length=10, program_length=8,
)


def run_row(row: str, core: str, minutes: float, quick: bool, runs: Path) -> dict:
    settings, metrics, *_ = ROWS[row]
    values = {**SCALE, **settings, **(QUICK if quick else {}), "core": core, "max_minutes": minutes}
    if quick and row == "counting_1000":
        values["max_count"] = 12
    values["run_dir"] = str(runs / f"{row}-{core}")
    config, _ = resolve_config(values, cuda=False)
    started = time.monotonic()
    results = Run.create(config, {}, config.run_dir).train(progress=False)
    scores = [100 * results["test"][m] for m in metrics]
    return {"row": row, "core": core, "scores": scores, "updates": results["updates"], "seconds": time.monotonic() - started}


def markdown(done: list[dict], cores: list[str], wall: float, minutes: float) -> str:
    lines = [
        "| task | paper Transformer | paper Feedback | paper LSTM | " + " | ".join(f"ours {c}" for c in cores) + " |",
        "|---|---|---|---|" + "---|" * len(cores),
    ]
    by_key = {(d["row"], d["core"]): d for d in done}
    for row in dict.fromkeys(d["row"] for d in done):
        _, metrics, transformer, feedback, lstm = ROWS[row]
        cells = []
        for core in cores:
            d = by_key.get((row, core))
            cells.append(" / ".join(f"{s:.1f}" for s in d["scores"]) + f" ({d['updates']} upd)" if d else "-")
        name = row + (" (char / seq)" if len(metrics) == 2 else "")
        lines.append(f"| {name} | {transformer} | {feedback} | {lstm or '-'} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Test accuracy in %; ({{n}} upd): updates made within {minutes:g} minutes of training per run. Wall time {wall / 60:.1f} minutes.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m seqtasks.table", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS), metavar="ROW", help=f"rows to run, of {list(ROWS)}")
    parser.add_argument("--cores", nargs="+", default=list(CORES), choices=list(CORES), metavar="CORE", help=f"of {list(CORES)}")
    parser.add_argument("--minutes", type=float, default=2.0, help="training minutes per run at most")
    parser.add_argument("--quick", action="store_true", help="tiny models and data, 3 updates: a smoke run")
    parser.add_argument("--output", default="seqtasks/results.md", help="markdown file written (rewritten after every run)")
    parser.add_argument("--runs", default=f"runs/table-{time.strftime('%Y%m%d-%H%M%S')}", help="folder of the runs")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error(f"--minutes must be > 0, got {args.minutes}")
    started, done = time.monotonic(), []
    for row in args.rows:
        for core in args.cores:
            done.append(run_row(row, core, args.minutes, args.quick, Path(args.runs)))
            print(json.dumps(done[-1]), flush=True)
            table = markdown(done, args.cores, time.monotonic() - started, args.minutes)
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            Path(args.output).write_text(table)
    print(table)
    return table


if __name__ == "__main__":
    main()
