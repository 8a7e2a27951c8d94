"""Raffel & Ellis's long-term memory problems: feed-forward attention against the mean and an LSTM.

    python -m experiments.long_sequences                               # their protocol: every length, 100 epochs at most
    python -m experiments.long_sequences --problems adding --lengths 100 1000 10000 --epochs 3

The claim: feed-forward attention (a per-step network, one softmax-weighted mean over time, no
recurrence) solves the adding, multiplication and XOR problems at lengths far beyond what a
recurrent network manages (they show up to 10,000 steps; the LSTM's classic results stop near
1,000), in the fixed-length and the variable-length (L .. 1.1 L) settings. Their protocol:
batches of 100 sequences, SGD with Nesterov momentum, squared error, an epoch of 1,000 updates,
stop at 100% accuracy (|error| < 0.04) or after 100 epochs. Here the stop is on a validation
set of 1,000 (the paper stopped on its test set), and the test accuracy is that of the best
validated weights on 1,000 more sequences.

Every (problem, setting, length, model, seed) is one `python -m seqtasks` run (one thread,
`--jobs` at once); the LSTM runs only at lengths up to `--lstm-max-length` (it steps through
time one step after another: at 10,000 steps an update takes seconds on a CPU). The training set
is `--train-sequences` sequences, fewer at long lengths so that it stays under `MAX_TRAIN_VALUES`
numbers in memory. Writes NAME.json (per-seed epochs to solve, test accuracy, seconds per update),
NAME.md (the table); run the same command again after an interruption to continue.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from envs.cli import positive_int
from experiments.estimate import print_expected_time
from experiments.jobs import ROOT, machine, run_stages, seq_flags, seq_job, seq_results
from experiments.stats import format_interval, iqm_interval, seed_count

PROBLEMS = ("adding", "multiplication", "xor")
MODELS = ("ffattn", "mean", "lstm")
MAX_TRAIN_VALUES = 40_000_000  # sequences x steps of a training set (x 2 channels x 4 bytes: 320 MB)
QUICK = dict(d_model=8, batch_size=4, n_valid=8, n_test=8)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", nargs="+", choices=PROBLEMS, default=list(PROBLEMS), metavar="PROBLEM", help=f"of {list(PROBLEMS)}")
    parser.add_argument("--lengths", nargs="+", type=positive_int, default=[50, 100, 500, 1000, 5000, 10000])
    parser.add_argument("--settings", nargs="+", choices=["fixed", "variable"], default=["fixed", "variable"],
                        help="fixed lengths L, or lengths uniform in L .. 1.1 L (default: both)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS), metavar="MODEL", help=f"of {list(MODELS)}")
    parser.add_argument("--lstm-max-length", type=positive_int, default=1000, help="the LSTM runs at lengths up to this (default: 1,000)")
    parser.add_argument("--epochs", type=positive_int, default=100, help="epochs at most (default: 100, the paper's)")
    parser.add_argument("--epoch-updates", type=positive_int, default=1000, help="updates per epoch, one validation each (default: 1,000)")
    parser.add_argument("--train-sequences", type=positive_int, default=10_000, help="training set size, capped at long lengths (default: 10,000)")
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 per cell (default: 3)")
    parser.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1, help="runs at once (default: the CPU count)")
    parser.add_argument("--name", default="long_sequences", help="output file stem (default: long_sequences)")
    parser.add_argument("--runs-dir", type=Path, default=None, help="where runs go (default: runs/experiments/NAME)")
    parser.add_argument("--out", type=Path, default=ROOT / "assets", help="where results go (default: assets/)")
    parser.add_argument("--no-estimate", action="store_true", help="start without timing an update of each model first")
    parser.add_argument("--quick", action="store_true", help="tiny models and data, to test the pipeline")
    return parser


def train_sequences(requested: int, length: int) -> int:
    """The training set size at `length`: as requested, capped at MAX_TRAIN_VALUES steps in all."""
    return max(1, min(requested, MAX_TRAIN_VALUES // length))


def seq_args(args: argparse.Namespace, problem: str, setting: str, length: int, model: str, seed: int) -> list[str]:
    values = dict(task=problem, core=model, seq_length=length, seed=seed, eval_every=args.epoch_updates, patience=0, n_valid=1000,
                  n_train=train_sequences(args.train_sequences, length))
    if args.quick:
        values.update(QUICK, n_train=max(QUICK["batch_size"], min(values["n_train"], 16)))
    return seq_flags(values) + (["--variable-length"] if setting == "variable" else [])


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    runs_dir = args.runs_dir or ROOT / "runs" / "experiments" / args.name
    seeds = list(range(args.seeds))
    grid = [(problem, setting, length, model) for problem in args.problems for setting in args.settings for length in args.lengths
            for model in args.models if model != "lstm" or length <= args.lstm_max_length]
    updates = args.epochs * args.epoch_updates
    job = {}
    for seed in seeds:
        for problem, setting, length, model in grid:
            folder = runs_dir / problem / setting / f"L{length}" / model / f"seed{seed}"
            job[problem, setting, length, model, seed] = seq_job(
                f"{problem}/{setting}/L{length}/{model}/seed{seed}", folder, seq_args(args, problem, setting, length, model, seed), updates)
    print(f"{len(job)} runs of at most {args.epochs} epochs of {args.epoch_updates:,} updates, {args.jobs} at a time, in {runs_dir}",
          flush=True)
    if not args.no_estimate:
        print_expected_time(list(job.values()), args.jobs)  # an upper bound: runs stop at 100%
    run_stages({"training": list(job.values())}, args.jobs)

    summary = {"epochs": args.epochs, "epoch_updates": args.epoch_updates, "seeds": len(seeds), "cells": []}
    for problem, setting, length, model in grid:
        per_seed = []
        for seed in seeds:
            result = seq_results(job[problem, setting, length, model, seed])
            solved = next((h["update"] for h in result["history"] if h["accuracy"] >= 1.0), None)
            per_seed.append({"seed": seed, "epochs_to_solve": None if solved is None else solved / args.epoch_updates,
                             "test": result["test"]["accuracy"], "updates": result["updates"],
                             "seconds_per_update": result["train_seconds"] / result["updates"],
                             "train_sequences": train_sequences(args.train_sequences, length)})
        solved = [run["epochs_to_solve"] for run in per_seed if run["epochs_to_solve"] is not None]
        summary["cells"].append({
            "problem": problem, "setting": setting, "length": length, "model": model, "per_seed": per_seed,
            "solved": len(solved), "median_epochs_to_solve": float(np.median(solved)) if solved else None,
            **iqm_interval({k: np.array([run[k] for run in per_seed]) for k in ("test", "seconds_per_update")}),
        })
    summary["command"] = "python -m experiments.long_sequences " + " ".join(sys.argv[1:])
    summary["machine"] = machine(args.jobs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    (args.out / f"{args.name}.md").write_text(table(summary))
    print(table(summary))


def table(summary: dict) -> str:
    """Markdown: one row per (problem, setting, length, model)."""
    lines = [
        f"At most {summary['epochs']} epochs of {summary['epoch_updates']:,} updates, {summary['seeds']} seeds. Solved: seeds "
        "reaching 100% validation accuracy; epochs: the median over those; test accuracy of the best weights, IQM [95% CI].\n",
        "| problem | lengths | model | solved | epochs to solve | test accuracy | s / update |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in summary["cells"]:
        lengths = f"{cell['length']:,}" if cell["setting"] == "fixed" else f"{cell['length']:,} .. {int(np.ceil(1.1 * cell['length'])):,}"
        epochs = "-" if cell["median_epochs_to_solve"] is None else f"{cell['median_epochs_to_solve']:g}"
        lines.append(f"| {cell['problem']} | {lengths} | {cell['model']} | {cell['solved']}/{summary['seeds']} | {epochs} | "
                     f"{format_interval(cell['test'])} | {format_interval(cell['seconds_per_update'], 3)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
