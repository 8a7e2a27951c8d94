"""Model variants side by side on one toy task, over training wall-clock time: two papers' claims.

    python -m experiments.seq_variants reservoir     # Reservoir Transformers: AUCC against wall-clock time
    python -m experiments.seq_variants persistent    # all-attention layers against standard layers

reservoir (Shen et al. 2021): frozen random layers interspersed with trained ones reach a given
  accuracy sooner in wall-clock time. A 2-layer Transformer against Reservoir Transformers with
  the same 2 trained layers and one frozen layer between them, of the ffn kind (FFN(LN(x)) + x)
  and of the transformer kind (a whole frozen layer), each with and without backskipping (no
  backward pass through the frozen layer). Their measure: AUCC, the area under the validation
  curve against training wall-clock time up to a horizon, here the shortest run's training time
  (so every curve covers it), divided by the horizon (1: perfect from the first second).
persistent (Sukhbaatar et al. 2019): all-attention layers, whose feed-forward sublayer is replaced
  by N persistent key/value vectors per head, do as well as standard layers at a matched
  parameter count. A 2-layer Transformer (feed-forward width 4d) against all-attention layers
  with N = 4d (then 2Nd persistent numbers per layer match the feed-forward's 8d^2 weights, up to
  its biases and LayerNorm) and with N = d (a quarter of the parameters).

Both on a 4x4 random walk of 8 actions with span 16 (2 layers reach 32 steps, more than an
episode): a task every variant can learn in a few minutes on a CPU, so that what differs is how
fast. Every (variant, seed) is one `python -m seqtasks` run of `--updates` updates (one thread,
`--jobs` at once); the table gives, per variant, the parameters (trained and frozen), seconds per
update, validation accuracy at the last update, AUCC, training seconds to reach `--level`
accuracy and test accuracy of the best weights, each as IQM over seeds [95% bootstrap CI]. The
figure is the IQM validation accuracy against training seconds with its band. Wall-clock
measures depend on what else ran on the machine: NAME.json names it; compare variants of one
run, never runs of different machines. Writes NAME.json (per-seed numbers and histories),
NAME.md and NAME.png; run the same command again after an interruption to continue.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from durable.records import write_json, write_text
from envs.cli import positive_int
from experiments.frame.curves import draw_curves
from experiments.frame.estimate import print_expected_time
from experiments.frame.flags import add_experiment_arguments, runs_folder
from experiments.frame.jobs import ROOT, seq_flags, seq_job, seq_results
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.seq_history import aucc, seconds_to_reach, time_curve, value_at
from experiments.frame.stats import iqm_interval, seed_count
from experiments.frame.tables import format_interval, markdown_table

D_MODEL = 32
TASK = dict(task="random_walk", grid_size=4, walk_length=8)
MODEL = dict(  # as experiments/memory_reach.py's, at a span that covers the episode
    preset="cpu", d_model=D_MODEL, n_layers=2, n_heads=2, span=16, dropout=0.0, batch_size=32, bptt=32, lr=3e-3,
    warmup=20, grad_clip=1.0, n_train=2000, n_valid=200, n_test=200, eval_every=50, patience=0,
)
QUICK = dict(d_model=8, batch_size=4, bptt=8, n_train=16, n_valid=8, n_test=8, eval_every=2, span=4)
STUDIES = {  # study -> {variant: (core, --core-opt)}
    "reservoir": {
        "transformer": ("transformer", ""),
        "ffn reservoir": ("reservoir", "kind=ffn,n_reservoir=1"),
        "ffn reservoir, backskip": ("reservoir", "kind=ffn,n_reservoir=1,backskip=true"),
        "transformer reservoir": ("reservoir", "kind=transformer,n_reservoir=1"),
        "transformer reservoir, backskip": ("reservoir", "kind=transformer,n_reservoir=1,backskip=true"),
    },
    "persistent": {
        "transformer (FF 4d)": ("transformer", ""),
        f"all-attention, N = 4d = {4 * D_MODEL}": ("transformer", f"persistent={4 * D_MODEL}"),
        f"all-attention, N = d = {D_MODEL}": ("transformer", f"persistent={D_MODEL}"),
    },
}
CURVE_POINTS = 60
METRIC = "accuracy"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", choices=list(STUDIES), help="which claim to test")
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 per variant (default: 3)")
    parser.add_argument("--updates", type=positive_int, default=1500, help="updates per run (default: 1,500)")
    parser.add_argument("--level", type=float, default=0.9, help="the accuracy whose time to reach is reported (default: 0.9)")
    add_experiment_arguments(parser, None, "output file stem (default: the study's name)", quick="tiny runs", folder="seq_variants")
    add_launcher_arguments(parser)
    return parser


def seq_args(core: str, options: str, seed: int, quick: bool) -> list[str]:
    values = {**MODEL, **TASK, **(QUICK if quick else {}), "core": core, "seed": seed}
    if quick and options.startswith("persistent"):
        options = "persistent=4"
    return seq_flags(values) + (["--core-opt", options] if options else [])


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    if not 0 < args.level <= 1:
        parser.error(f"--level must be in (0, 1], got {args.level}")
    name = args.name or args.study
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / name)
    seeds, variants = list(range(args.seeds)), STUDIES[args.study]
    job = {}
    for seed in seeds:  # seed-major: the variants run side by side, so a change in load hits them alike
        for variant, (core, options) in variants.items():
            folder = runs_dir / "".join(c if c.isalnum() else "-" for c in variant) / f"seed{seed}"
            job[variant, seed] = seq_job(f"{variant}/seed{seed}", folder, seq_args(core, options, seed, args.quick), args.updates)
    print(f"{len(job)} runs of {args.updates:,} updates, {where_runs_go(args)}, in {runs_dir}", flush=True)
    if not args.no_estimate:
        print_expected_time(list(job.values()), args.jobs)
    run_stages({"training": list(job.values())}, args)

    summary = summarise(args, seeds, {key: seq_results(j) for key, j in job.items()})
    summary["command"] = "python -m experiments.seq_variants " + " ".join(sys.argv[1:])
    summary["machine"] = launcher_description(args)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{name}.json", summary, indent=1)
    write_text(args.out / f"{name}.md", table(summary))
    horizon = summary["horizon_seconds"]
    times = np.linspace(0, horizon, CURVE_POINTS)
    curves = {variant: np.array([time_curve(run["history"], METRIC, times) for run in row["per_seed"]])
              for variant, row in summary["variants"].items()}
    draw_curves(curves, horizon, {}, f"{args.study}: random walk 4x4, validation accuracy", "accuracy (IQM, 95% CI)",
                args.out / f"{name}.png", xlabel="training seconds")
    print(table(summary))


def summarise(args: argparse.Namespace, seeds: list[int], results: dict) -> dict:
    """Per variant: per-seed numbers and their IQM intervals (see the module docstring)."""
    horizon = min(r["train_seconds"] for r in results.values())
    summary = {"study": args.study, "task": TASK, "model": MODEL, "updates": args.updates, "level": args.level,
               "seeds": len(seeds), "horizon_seconds": horizon, "variants": {}}
    for variant, (core, options) in STUDIES[args.study].items():
        per_seed = []
        for seed in seeds:
            result = results[variant, seed]
            history = result["history"]
            per_seed.append({
                "seed": seed, "parameters": result["parameters"], "updates": result["updates"],
                "seconds_per_update": result["train_seconds"] / result["updates"], "final": value_at(history, METRIC),
                "aucc": aucc(history, METRIC, horizon), "seconds_to_level": seconds_to_reach(history, METRIC, args.level),
                "test": result["test"][METRIC], "history": [{k: h[k] for k in ("update", "seconds", METRIC)} for h in history],
            })
        keys = ("seconds_per_update", "final", "aucc", "test")
        stats = iqm_interval({k: np.array([run[k] for run in per_seed]) for k in keys})
        reached = [run["seconds_to_level"] for run in per_seed if run["seconds_to_level"] is not None]
        summary["variants"][variant] = {"core": core, "core_options": options, "parameters": per_seed[0]["parameters"],
                                        "per_seed": per_seed, **stats, "reached_level": len(reached),
                                        "median_seconds_to_level": float(np.median(reached)) if reached else None}
    return summary


def table(summary: dict) -> str:
    """Markdown: one row per variant."""
    caption = (f"{summary['updates']:,} updates per run, {summary['seeds']} seeds; IQM over seeds [95% bootstrap CI]. AUCC up to "
               f"{summary['horizon_seconds']:.0f} training seconds (the shortest run). Time to {summary['level']:.0%}: the median "
               "over the seeds that reached it.")
    columns = ["variant", "parameters trained / frozen", "s / update", "accuracy at the end", "AUCC", f"seconds to {summary['level']:.0%}", "test"]
    rows = []
    for variant, row in summary["variants"].items():
        parameters = f"{row['parameters']['trained']:,} / {row['parameters']['frozen']:,}"
        seconds = row["median_seconds_to_level"]
        reach = f"{seconds:.0f} ({row['reached_level']}/{summary['seeds']} seeds)" if seconds is not None else f"never (0/{summary['seeds']})"
        rows.append([variant, parameters, format_interval(row["seconds_per_update"], 4), format_interval(row["final"]),
                     format_interval(row["aucc"]), reach, format_interval(row["test"])])
    return markdown_table(columns, rows, caption)
if __name__ == "__main__":
    main()
