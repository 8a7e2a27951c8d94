"""Raffel & Ellis's long-term memory problems: feed-forward attention against the unweighted mean.

    python -m experiments.long_sequences                               # their protocol: every length, 100 epochs at most
    python -m experiments.long_sequences --lengths 100 500 1000 --epochs 5

The claim (arXiv:1512.08756v1, Table 1): feed-forward attention (a per-step network, one
softmax-weighted mean over time, no recurrence) solves the addition and multiplication problems
at lengths T0 = 50 .. 10,000, lengths uniform in T0 .. 1.1 T0, in a few epochs, beyond what
recurrent networks have shown (the LSTM: addition to 1,000, multiplication to 100); the
unweighted mean needs more epochs and fails multiplication at 5,000 and 10,000. Their protocol,
which the long-term problems' defaults follow (seqtasks/config.py): batches of 100 sequences,
Adam, squared error, leaky ReLUs, an epoch of 1,000 updates, stop at 100% accuracy
(|error| < 0.04) or after 100 epochs; they report the best of four learning rates (.0003, .001,
.003, .01), here one (3e-3, the default). XOR is the seed text's, not in the published paper.
Settings: `fixed` (every sequence exactly L) and `variable` (uniform in L .. 1.1 L: the paper's
Table 1 setting, PAPER_EPOCHS). Here the stop is on a validation set of 1,000 (the paper stopped
on its test set), and the test accuracy is that of the best validated weights on 1,000 more
sequences.

Every (problem, setting, length, model, seed) is one `python -m seqtasks` run (one thread,
`--jobs` at once); the LSTM runs only at lengths up to `--lstm-max-length` (it steps through
time one step after another, where the attention models take all steps at once). The training set
is `--train-sequences` sequences, fewer at long lengths so that it stays under `MAX_TRAIN_VALUES`
numbers in memory. Writes NAME.json (per-seed epochs to solve, test accuracy, seconds per update),
NAME.md (the table); run the same command again after an interruption to continue.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from durable.records import write_json, write_text
from envs.cli import positive_int
from experiments.frame.flags import Distinct, add_experiment_arguments, as_published, runs_folder
from experiments.frame.estimate import print_expected_time
from experiments.frame.jobs import ROOT, seq_flags, seq_job, seq_results
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.stats import iqm_interval, seed_count
from experiments.frame.tables import format_interval, markdown_table

PROBLEMS = ("adding", "multiplication", "xor")
MODELS = ("ffattn", "mean", "lstm")
# arXiv:1512.08756v1 (Raffel & Ellis, 29 Dec 2015) Table 1: epochs to 100% test accuracy, or the
# accuracy after 100 epochs (a string), lengths uniform in T0 .. 1.1 T0, the best of 4 learning rates
PAPER_EPOCHS = {
    ("adding", "ffattn"): {50: 1, 100: 1, 500: 1, 1000: 1, 5000: 2, 10000: 3},
    ("adding", "mean"): {50: 1, 100: 1, 500: 1, 1000: 2, 5000: 8, 10000: 17},
    ("multiplication", "ffattn"): {50: 1, 100: 2, 500: 4, 1000: 2, 5000: 15, 10000: 6},
    ("multiplication", "mean"): {50: 2, 100: 2, 500: 8, 1000: 33, 5000: "89.8%", 10000: "80.8%"},
}
MAX_TRAIN_VALUES = 40_000_000  # sequences x steps of a training set (x 2 channels x 4 bytes: 320 MB)
QUICK = dict(d_model=8, batch_size=4, n_valid=8, n_test=8)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", nargs="+", choices=PROBLEMS, action=Distinct, default=list(PROBLEMS), metavar="PROBLEM", help=f"of {list(PROBLEMS)}")
    parser.add_argument("--lengths", nargs="+", type=positive_int, action=Distinct, default=[50, 100, 500, 1000, 5000, 10000])
    parser.add_argument("--settings", nargs="+", choices=["fixed", "variable"], action=Distinct, default=["fixed", "variable"],
                        help="fixed lengths L, or lengths uniform in L .. 1.1 L (default: both)")
    parser.add_argument("--models", nargs="+", choices=MODELS, action=Distinct, default=["ffattn", "mean"], metavar="MODEL",
                        help=f"of {list(MODELS)} (default: ffattn mean, the paper's two)")
    parser.add_argument("--lstm-max-length", type=positive_int, default=1000, help="the LSTM runs at lengths up to this (default: 1,000)")
    parser.add_argument("--epochs", type=positive_int, default=100, help="epochs at most (default: 100, the paper's)")
    parser.add_argument("--epoch-updates", type=positive_int, default=1000, help="updates per epoch, one validation each (default: 1,000)")
    parser.add_argument("--train-sequences", type=positive_int, default=10_000, help="training set size, capped at long lengths (default: 10,000)")
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 per cell (default: 3)")
    add_experiment_arguments(parser, "long_sequences", "output file stem (default: long_sequences)", quick="tiny models and data", folder="long_sequences")
    add_launcher_arguments(parser)
    return parser


def train_sequences(requested: int, length: int) -> int:
    """The training set size at `length`: as requested, capped at MAX_TRAIN_VALUES steps in all."""
    return max(1, min(requested, MAX_TRAIN_VALUES // length))


def seq_args(args: argparse.Namespace, problem: str, setting: str, length: int, model: str, seed: int) -> list[str]:
    values = dict(task=problem, core=model, seq_length=length, seed=seed, eval_every=args.epoch_updates, patience=0, n_valid=1000,
                  n_train=train_sequences(args.train_sequences, length))
    if args.quick:
        values.update(QUICK, n_train=max(QUICK["batch_size"], min(values["n_train"], 16)))
    return seq_flags(values) + (["--variable-length"] if setting == "variable" else []) + as_published(model)


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / args.name)
    seeds = list(range(args.seeds))
    grid = [(problem, setting, length, model) for problem in args.problems for setting in args.settings for length in args.lengths
            for model in args.models if model != "lstm" or length <= args.lstm_max_length]
    updates = args.epochs * args.epoch_updates
    job = {}  # a cell's seeds one after another: an interrupted experiment has whole cells
    for problem, setting, length, model in grid:
        for seed in seeds:
            folder = runs_dir / problem / setting / f"L{length}" / model / f"seed{seed}"
            job[problem, setting, length, model, seed] = seq_job(
                f"{problem}/{setting}/L{length}/{model}/seed{seed}", folder, seq_args(args, problem, setting, length, model, seed), updates)
    print(f"{len(job)} runs of at most {args.epochs} epochs of {args.epoch_updates:,} updates, {where_runs_go(args)}, in {runs_dir}",
          flush=True)
    if not args.no_estimate:
        print_expected_time(list(job.values()), args.jobs)  # an upper bound: runs stop at 100%
    run_stages({"training": list(job.values())}, args)

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
            "paper": PAPER_EPOCHS.get((problem, model), {}).get(length),
            **iqm_interval({k: np.array([run[k] for run in per_seed]) for k in ("test", "seconds_per_update")}),
        })
    summary["command"] = "python -m experiments.long_sequences " + " ".join(sys.argv[1:])
    summary["machine"] = launcher_description(args)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", summary, indent=1)
    write_text(args.out / f"{args.name}.md", table(summary))
    print(table(summary))


def table(summary: dict) -> str:
    """Markdown: one row per (problem, setting, length, model)."""
    caption = (f"At most {summary['epochs']} epochs of {summary['epoch_updates']:,} updates, {summary['seeds']} seeds. Solved: seeds "
               "reaching 100% validation accuracy; epochs to solve: per seed (- where not solved); test accuracy of the best "
               "weights, IQM [95% CI]. Paper: arXiv:1512.08756v1 Table 1, epochs to 100% test accuracy or the accuracy after "
               "100 epochs, lengths T0 .. 1.1 T0 (the `..` rows here), the best of 4 learning rates.")
    columns = ["problem", "lengths", "model", "solved", "epochs to solve", "paper", "test accuracy", "s / update"]
    rows = []
    for cell in summary["cells"]:
        lengths = f"{cell['length']:,}" if cell["setting"] == "fixed" else f"{cell['length']:,} .. {int(np.ceil(1.1 * cell['length'])):,}"
        epochs = ", ".join("-" if run["epochs_to_solve"] is None else f"{run['epochs_to_solve']:g}" for run in cell["per_seed"])
        paper = "-" if cell.get("paper") is None else str(cell["paper"])
        rows.append([cell["problem"], lengths, cell["model"], f"{cell['solved']}/{summary['seeds']}", epochs, paper,
                     format_interval(cell["test"]), format_interval(cell["seconds_per_update"], 3)])
    return markdown_table(columns, rows, caption)
if __name__ == "__main__":
    main()
