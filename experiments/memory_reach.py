"""Table 1 of the paper at CPU scale: memory a Transformer cannot reach and a Feedback Transformer can.

    python -m experiments.memory_reach                   # random walk span sweep, counting, algorithmic; 3 seeds
    python -m experiments.memory_reach --preset paper    # the paper's sizes (a GPU's work; prints the expected time)

The claim: a Transformer whose layers each see `span` steps back reaches at most span x layers
steps into the past, so it fails on a task whose answer depends on older inputs; the Feedback
Transformer's memory is recurrent (each step's memory vector is made from all layers of the step
before), so it can carry what it needs at any span. The paper shows it at a scale far beyond a
CPU (d 256, 4 layers, span 100, walks of 100 actions); here the tasks and spans shrink instead of
the budget, so that a small model learns in minutes and the span decides whether the
Transformer's reach covers the dependency:

  random_walk   4x4 grid, walks of 16 actions: the cell after each action depends on every
                action since the reset; swept over spans (default 1 2 4 8 16: 2 layers reach 2 .. 32)
  algorithmic   3 variables, programs of 12 statements (about 60 tokens): a print needs the
                variable's initialisation and every change since, at span `--task-span`
  counting      runs of up to 20 A's, then as many B's and a stop: the stop needs the run's
                length, up to 41 tokens back, at span `--task-span`

Every (task, core, span, seed) is one `python -m seqtasks` run (the model below, one thread). The
Feedback Transformer trains for `--updates` updates, the others, several times faster an update,
for `--fast-factor` times as many, so that both comparisons the issue asks for can be read from
each run's validation history: accuracy at equal updates (the validation at update `--updates`)
and at equal training time (the last validation within the shorter of the two attention cores'
training times at that task, span and seed; for the LSTM, the shortest attention run's: the
Transformer then has had more updates than the Feedback Transformer). Training times are
measured on a shared machine, so they carry its load at the time of each run. The test accuracy is that of the best validated weights at the end. The LSTM is a
recurrent reference (no span). Counting is scored by whole episodes (sequence accuracy: every
B and the stop in place); its token accuracy is mostly the B's, which need no memory.

Writes NAME.json (config, per-seed numbers and histories, IQM with 95% stratified
bootstrap intervals), NAME.md (the table) and NAME.png (accuracy against span). Runs go in
parallel processes (`--jobs`); run the same command again after an interruption to continue.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from durable.records import atomic_file, write_json, write_text
from envs.cli import positive_int
from experiments.frame.flags import KEEPING_OPTIONS, Distinct, add_experiment_arguments, as_published, runs_folder
from experiments.frame.estimate import print_expected_time
from experiments.frame.jobs import ROOT, seq_flags, seq_job, seq_results
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.seq_history import value_at
from experiments.frame.stats import iqm_interval, seed_count
from experiments.frame.tables import format_interval, markdown_table, minutes_per_run

LAYERS = 2
TASKS = {  # name -> (seqtasks flags at the CPU scale, the metric scored)
    "random_walk": (dict(task="random_walk", grid_size=4, walk_length=16), "accuracy"),
    "algorithmic": (dict(task="algorithmic", n_vars=3, program_length=12), "accuracy"),
    "counting": (dict(task="counting", max_count=20), "sequence_accuracy"),
}
PAPER_TASKS = {  # the paper's sizes (the seqtasks defaults): Table 1's rows
    "random_walk": dict(task="random_walk", grid_size=8, walk_length=100),
    "algorithmic": dict(task="algorithmic", n_vars=3, program_length=100),
    "counting": dict(task="counting", max_count=50),
}
MODEL = dict(  # a model and data a CPU trains in minutes
    preset="cpu", d_model=32, n_layers=LAYERS, n_heads=2, dropout=0.0, batch_size=32, bptt=32, lr=3e-3, warmup=20,
    grad_clip=1.0, n_train=2000, n_valid=200, n_test=200, eval_every=100, patience=0,
)
PAPER_MODEL = dict(preset="paper", eval_every=1000, patience=0)  # Table 9's settings, n_layers 4
QUICK = dict(d_model=8, n_heads=2, batch_size=4, bptt=8, n_train=16, n_valid=8, n_test=8, eval_every=2, grid_size=3,
             walk_length=4, program_length=8, max_count=3)
# --cores choices that are a core with options, each a row of its own: the Feedback core with its
# gated carry (agents/cores/feedback/reference.py, keep_t_max at its default, 100) or its tanh
# write read raw (with the orthogonal value path, as the memory-length runner's feedback-span16-tanh)
# or its kept vector (keep_slot=True)
VARIANTS = {f"feedback-{name}": ("feedback", keep) for name, keep in KEEPING_OPTIONS.items()}
SPANNED = ("feedback", "transformer", *VARIANTS)  # cores with an attention span; the others are references
ACCURACY_DIGITS = 2


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), action=Distinct, default=list(TASKS), metavar="TASK", help=f"of {list(TASKS)}")
    parser.add_argument("--spans", nargs="+", type=positive_int, action=Distinct, default=None,
                        help="random_walk's span sweep (default: 1 2 4 8 16; the paper preset: 100)")
    parser.add_argument("--task-span", type=positive_int, default=None, help="the other tasks' span (default: 2; the paper preset: 100)")
    parser.add_argument("--cores", nargs="+", choices=["feedback", "transformer", "lstm", *VARIANTS], action=Distinct,
                        default=["feedback", "transformer", "lstm"],
                        help="models (default: feedback transformer lstm); feedback-carry: the Feedback core with its gated carry (carry=gate); "
                             "feedback-tanh: with its tanh write read raw; feedback-kept: with its kept vector (keep_slot=True)")
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 per cell (default: 3)")
    parser.add_argument("--updates", type=positive_int, default=None,
                        help="the Feedback Transformer's updates per run (default: 2,000; the paper preset: 100,000)")
    parser.add_argument("--fast-factor", type=positive_int, default=None,
                        help="the other cores train this many times --updates (default: 3; the paper preset: 1)")
    parser.add_argument("--preset", choices=["cpu", "paper"], default="cpu", help="cpu: the shrunk tasks above; paper: Table 1's sizes and Table 9's model")
    add_experiment_arguments(parser, "memory_reach", "output file stem (default: memory_reach; the paper preset adds paper_)", quick="tiny runs", folder="memory_reach")
    add_launcher_arguments(parser)
    return parser


def resolve_defaults(args: argparse.Namespace) -> None:
    """Fill the budget and span defaults of the chosen preset."""
    paper = args.preset == "paper"
    if paper and args.name == "memory_reach":
        args.name = "paper_memory_reach"
    args.spans = args.spans or ([100] if paper else [1, 2, 4, 8, 16])
    args.task_span = args.task_span or (100 if paper else 2)
    args.updates = args.updates or (100_000 if paper else 2_000)
    args.fast_factor = args.fast_factor or (1 if paper else 3)


def cells(args: argparse.Namespace) -> list[tuple[str, str, int | None]]:
    """(task, core, span) of every run but the seed; span None for the references."""
    out = []
    for task in args.tasks:
        spans = args.spans if task == "random_walk" else [args.task_span]
        out += [(task, core, span) for core in args.cores if core in SPANNED for span in spans]
        out += [(task, core, None) for core in args.cores if core not in SPANNED]
    return out


def seq_args(args: argparse.Namespace, task: str, core: str, span: int | None, seed: int) -> list[str]:
    values = {**(PAPER_MODEL if args.preset == "paper" else MODEL), **(PAPER_TASKS[task] if args.preset == "paper" else TASKS[task][0])}
    if args.quick:
        values.update(QUICK)
    trained, options = VARIANTS.get(core, (core, None))
    values.update(core=trained, seed=seed)
    if span is not None:
        values["span"] = span
    return seq_flags(values) + as_published(trained) + (["--core-opt", options] if options else [])


def budget(args: argparse.Namespace, core: str) -> int:
    """Updates of a run: --updates for the Feedback core (with its options), --fast-factor times that for the others."""
    return args.updates if VARIANTS.get(core, (core,))[0] == "feedback" else args.updates * args.fast_factor


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    resolve_defaults(args)
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / args.name)
    seeds = list(range(args.seeds))
    grid = cells(args)
    job = {}
    for task, core, span in grid:
        for seed in seeds:
            folder = runs_dir / task / (core if span is None else f"{core}-span{span}") / f"seed{seed}"
            job[task, core, span, seed] = seq_job(f"{task}/{folder.parent.name}/seed{seed}", folder,
                                                  seq_args(args, task, core, span, seed), budget(args, core))
    jobs = list(job.values())
    print(f"{len(jobs)} runs ({args.preset} preset; feedback {args.updates:,} updates, the others {budget(args, 'lstm'):,}), "
          f"{where_runs_go(args)}, in {runs_dir}", flush=True)
    if not args.no_estimate:
        print_expected_time(jobs, args.jobs)
    run_stages({"training": jobs}, args)

    summary = summarise(args, grid, seeds, {key: seq_results(j) for key, j in job.items()})
    summary["command"] = "python -m experiments.memory_reach " + " ".join(sys.argv[1:])
    summary["machine"] = launcher_description(args)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", summary, indent=1)
    write_text(args.out / f"{args.name}.md", table(summary))
    if "random_walk" in args.tasks:
        plot(summary, args.out / f"{args.name}.png")
    print(table(summary))


def summarise(args: argparse.Namespace, grid: list, seeds: list[int], results: dict) -> dict:
    """Per task and (core, span): per-seed numbers and their IQM intervals (module docstring)."""
    summary = {"preset": args.preset, "updates": args.updates, "fast_factor": args.fast_factor, "seeds": len(seeds),
               "layers": LAYERS if args.preset == "cpu" else 4, "tasks": {}}
    for task in args.tasks:
        metric = TASKS[task][1]
        task_cells = [(core, span) for t, core, span in grid if t == task]
        rows = {}
        for core, span in task_cells:
            per_seed = []
            for seed in seeds:
                result = results[task, core, span, seed]
                # equal time: the shortest training of the attention cores at this span (for a
                # reference, of all the task's attention runs of this seed)
                peers = [results[task, c, s, seed] for c, s in task_cells if s is not None and (s == span or span is None)]
                equal_time = min((r["train_seconds"] for r in peers), default=result["train_seconds"])  # lstm alone: its own
                per_seed.append({
                    "seed": seed, "test": result["test"][metric], "updates": result["updates"],
                    "train_seconds": result["train_seconds"],
                    "at_equal_updates": value_at(result["history"], metric, update=args.updates),
                    "at_equal_time": value_at(result["history"], metric, seconds=equal_time), "equal_time_seconds": equal_time,
                    "history": [[h["update"], h["seconds"], h[metric]] for h in result["history"]],
                })
            stats = iqm_interval({k: np.array([run[k] for run in per_seed]) for k in ("test", "at_equal_updates", "at_equal_time")})
            name = core if span is None else f"{core} span {span}"
            rows[name] = {"core": core, "span": span, "reach": None if span is None else span * summary["layers"],
                          "per_seed": per_seed, **stats}
        summary["tasks"][task] = {"settings": TASKS[task][0] if args.preset == "cpu" else PAPER_TASKS[task], "metric": metric, "rows": rows}
    return summary


def table(summary: dict) -> str:
    """Markdown: one row per (task, core, span)."""
    caption = (f"Validation accuracy at {summary['updates']:,} updates (equal updates), within the shorter "
               f"training time of the two attention cores at that span (equal time), and test accuracy of the best weights after training "
               f"(feedback {summary['updates']:,} updates, the others {summary['updates'] * summary['fast_factor']:,}); "
               f"IQM over {summary['seeds']} seeds [95% bootstrap CI]. Reach: span x {summary['layers']} layers.")
    columns = ["task", "model", "reach", "equal updates", "equal time", "test (end)", "per seed (test)", "training time per run"]
    rows = []
    for task, result in summary["tasks"].items():
        for name, row in result["rows"].items():
            seeds = ", ".join(f"{run['test']:.{ACCURACY_DIGITS}f}" for run in row["per_seed"])
            reach = "recurrent" if row["reach"] is None else str(row["reach"])
            rows.append([f"{task} ({result['metric'].replace('_', ' ')})", name, reach, format_interval(row["at_equal_updates"]),
                         format_interval(row["at_equal_time"]), format_interval(row["test"]), seeds,
                         minutes_per_run(run["train_seconds"] for run in row["per_seed"])])
    return markdown_table(columns, rows, caption)
def plot(summary: dict, path: Path) -> None:
    """Random walk accuracy against span at equal updates and at equal time: IQM with its 95%
    interval per attention core, the LSTM as a band; a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["tasks"]["random_walk"]["rows"]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, key, title in zip(axes, ("at_equal_updates", "at_equal_time"), ("equal updates", "equal training time")):
        for core in SPANNED:
            spanned = sorted((row["span"], row[key]) for row in rows.values() if row["core"] == core)
            if not spanned:
                continue
            spans = [s for s, _ in spanned]
            iqm = np.array([r["iqm"] for _, r in spanned])
            low, high = np.array([r["ci_low"] for _, r in spanned]), np.array([r["ci_high"] for _, r in spanned])
            ax.errorbar(spans, iqm, yerr=[iqm - low, high - iqm], marker="o", capsize=4, label=core)
        for name, row in rows.items():
            if row["span"] is None:
                ax.axhline(row[key]["iqm"], color="grey", linestyle="--", label=name)
                ax.axhspan(row[key]["ci_low"], row[key]["ci_high"], color="grey", alpha=0.15)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"attention span (reach = span x {summary['layers']} layers)")
        ax.set_title(f"random walk, {title}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("validation accuracy (IQM, 95% CI)")
    axes[0].legend()
    figure.tight_layout()
    with atomic_file(path, "wb") as file:
        figure.savefig(file, format="png", dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    main()
