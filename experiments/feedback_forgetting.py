"""Why training erases the small-span Feedback Transformer's memory of the corridor's cue, and
which changes keep it: traced training runs, solved and failed side by side.

    python -m experiments.feedback_forgetting                               # the paper's model and training, LSTM beside it
    python -m experiments.feedback_forgetting --variants bptt64 entropy0.03 --references

Each run is a corridor run of corridor_span.py's settings (8 cells, 32-step limit, CPU preset,
entropy cost 0.01, the observation only, 2 layers) trained through experiments/memory_trace.py,
which probes the agent's memory path as it trains (experiments/memory_probes.py: the memory's
size and its cue part step by step, their retention, softmax(w), the weights' norms, the
gradient reaching the cue's step, the cue separation at the doors). Every (variant, door order,
span, seed) is one run: `--doors fixed` makes the cue alone say up or down, `random` (the
paper's) makes the right door the cue XOR the doors' order. Then evaluate.py --greedy (100
episodes). The variants (VARIANTS) are the paper's model and training and, each changing one
thing, the remedies the mechanism suggests; the LSTM is the reference. Writes NAME.json (every
run's success and probes, each probed quantity a list over the probes), NAME.md (success per variant with Wilson intervals) and NAME.png
(the probes over training, solved runs against failed).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np

from agents.plot_curves import save_figure
from durable.records import read_record, write_json, write_text
from envs.cli import positive_int
from experiments.frame.flags import Distinct, QUICK_ALGO, add_experiment_arguments, as_published, minibatch_args, output_name, run_frames, runs_folder
from experiments.frame.curves import training_seconds
from experiments.frame.estimate import print_expected_time
from experiments.frame.jobs import EVAL_SEED, ROOT, evaluate_job, evaluation, train_job
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.stats import seed_count, solved_interval
from experiments.frame.tables import format_solved, markdown_table

LENGTH, LAYERS, ENTROPY = 8, 2, 0.01
SOLVED = 0.95  # greedy success at which a run counts as having solved the corridor
# variant -> (what it changes, its train_ALGO.py arguments beyond the shared ones)
VARIANTS = {
    "paper": ("the paper's model and corridor_span.py's training", []),
    "value_init": ("value and output projections start orthogonal (a model option)", ["--core-opt", "value_init=orthogonal"]),
    "no_read_norm": ("the memory read raw, not through a LayerNorm (a model option: read_norm=False)", ["--core-opt", "read_norm=False"]),
    "value_init+no_read_norm": ("both: the orthogonal value path read raw (model options)",
                                ["--core-opt", "value_init=orthogonal", "--core-opt", "read_norm=False"]),
    "entropy0.03": ("entropy cost 0.03 instead of 0.01", ["--entropy-coef", "0.03"]),
    "lr3e-3": ("learning rate 3e-3 instead of 1e-3", ["--learning-rate", "3e-3"]),
    "bptt64": ("gradient window of 64 steps (2 rollouts): every episode's cue step inside it", ["--bptt", "64"]),
}
QUICK = ["--num-envs", "4", "--core-opt", "d_model=16,n_heads=2"]
QUICK_LSTM = ["--num-envs", "4", "--core-opt", "hidden_size=16"]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="*", choices=list(VARIANTS), action=Distinct, default=["paper"])
    parser.add_argument("--references", nargs="*", choices=["lstm"], action=Distinct, default=["lstm"])
    parser.add_argument("--doors", nargs="+", choices=["fixed", "random"], action=Distinct, default=["fixed", "random"])
    parser.add_argument("--spans", nargs="+", type=positive_int, action=Distinct, default=[1, 2])
    parser.add_argument("--frames", type=positive_int, default=None, help="env frames per run (default: 1,500,000)")
    parser.add_argument("--seeds", type=seed_count, default=10, help="seeds 0 .. N-1 (default: 10)")
    parser.add_argument("--eval-episodes", type=positive_int, default=100)
    add_experiment_arguments(parser, None, "output file stem (default: feedback_forgetting, _ppo with --algo ppo)",
                             "runs/experiments/feedback_forgetting/ALGO", algo=True, minibatches=True, folder="feedback_forgetting")
    add_launcher_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    minibatches = minibatch_args(parser, args)
    frames = run_frames(args, 1_500_000)
    name = output_name(args, "feedback_forgetting")
    seeds = list(range(args.seeds))
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / "feedback_forgetting" / (args.algo + (f"-mb{args.num_minibatches}" if minibatches else "")))
    shared = ["--preset", "cpu", "--no-previous-inputs", "--entropy-coef", str(ENTROPY), *minibatches,
              *([] if minibatches or not args.quick else QUICK_ALGO[args.algo])]
    # (variant, doors, span or None for a reference) -> its train_ALGO.py arguments
    models = {(variant, doors, span): ["--core", "feedback", "--core-opt", f"span={span},n_layers={LAYERS}", *VARIANTS[variant][1], *(QUICK if args.quick else [])]
              for variant in args.variants for doors in args.doors for span in args.spans}
    models.update({(core, doors, None): ["--core", core, *as_published(core), *(QUICK_LSTM if args.quick else [])] for core in args.references for doors in args.doors})
    cells = [(model, seed) for seed in seeds for model in models]
    run_dir = {(model, seed): runs_dir / model[0] / model[1] / (f"span{model[2]}" if model[2] else "") / f"seed{seed}" for model, seed in cells}
    env = lambda doors: ["--env", "corridor", "--env-opt", f"length={LENGTH},max_episode_steps={4 * LENGTH},doors={doors}"]  # noqa: E731
    training = [train_job(f"{model} seed {seed}", run_dir[model, seed], [*env(model[1]), *shared, *models[model], "--seed", str(seed)],
                          frames, args.algo, traced=True) for model, seed in cells]
    evaluations = {cell: evaluate_job(run_dir[cell], 2 if args.quick else args.eval_episodes, frames, greedy=True) for cell in cells}
    print(f"{len(cells)} traced runs of {frames:,} frames, {where_runs_go(args)}, in {runs_dir}")
    if not (args.quick or args.no_estimate):
        print_expected_time(training, args.jobs)
    run_stages({"training": training, "evaluation": list(evaluations.values())}, args)

    summary = {
        "command": "python -m experiments.feedback_forgetting " + shlex.join(sys.argv[1:] if argv is None else argv),
        "machine": launcher_description(args), "algo": args.algo, "num_minibatches": args.num_minibatches, "frames": frames,
        "length": LENGTH, "layers": LAYERS, "entropy_coef": ENTROPY, "seeds": seeds,
        "eval": f"{args.eval_episodes} greedy episodes per run, evaluation env streams of seed {EVAL_SEED}",
        "variants": {variant: VARIANTS[variant][0] for variant in args.variants}, "models": [],
    }
    for (variant, doors, span) in models:
        runs = []
        for seed in seeds:
            cell = ((variant, doors, span), seed)
            trace = read_record(run_dir[cell] / "trace.json")  # whole: it is one of the training job's outputs
            runs.append({"seed": seed, "success": evaluation(evaluations[cell])["agent"]["success"],
                         "training_seconds": round(training_seconds(run_dir[cell]), 1), "probes": trace["probes"]})
        success = np.array([run["success"] for run in runs])
        summary["models"].append({"variant": variant, "doors": doors, "span": span, "solved": solved_interval(success, SOLVED), "runs": runs})
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{name}.json", rounded(by_column(summary)), separators=(",", ":"))
    write_text(args.out / f"{name}.md", table(summary))
    draw(summary, args.out / f"{name}.png")
    print(table(summary))


def by_column(summary: dict) -> dict:
    """`summary` with each run's probes as {quantity: [value at each probe]} (a list per quantity,
    in the order of "frames"), as its JSON holds them: a third of the size of one dict per probe."""
    models = [{**model, "runs": [{**run, "probes": {key: [p.get(key) for p in run["probes"]] for key in run["probes"][0]}}
                                 for run in model["runs"]]} for model in summary["models"]]
    return {**summary, "models": models}


def rounded(value):
    """`value` with every float rounded to 4 significant digits (the probes' last digits are
    float32 noise; this keeps an experiment's JSON a few hundred kB)."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return value


def final(run: dict, key: str) -> float:
    return run["probes"][-1][key]


def table(summary: dict) -> str:
    """One row per (variant, doors, span): runs solved with the Wilson interval, each seed's
    success, and the memory's state at the end against the fresh policy's."""
    caption = (f"Greedy success on a corridor of {summary['length']} cells after {summary['frames']:,} frames of {summary['algo'].upper()}, "
               f"{len(summary['seeds'])} seeds; solved: greedy success >= {SOLVED}. Cue separation at the doors and the memory's per-step "
               "retention (experiments/memory_probes.py), median over seeds, fresh -> trained.")
    columns = ["variant", "doors", "span", "solved: runs, probability [Wilson 95% CI]", "success per seed", "cue separation", "retention", "memory size"]
    rows = []
    for model in summary["models"]:
        runs = model["runs"]
        first = lambda key: np.median([run["probes"][0][key] for run in runs])  # noqa: E731
        last = lambda key: np.median([final(run, key) for run in runs])  # noqa: E731
        feedback = model["span"] is not None
        per_seed = ", ".join(f"{run['success']:.2f}" for run in runs)
        retention = f"{first('retention'):.2f} -> {last('retention'):.2f}" if feedback else "-"
        size = (f"{np.median([np.mean(run['probes'][0]['memory_norm'][1:]) for run in runs]):.1f} -> "
                f"{np.median([np.mean(run['probes'][-1]['memory_norm'][1:]) for run in runs]):.1f}") if feedback else "-"
        rows.append([model["variant"], model["doors"], model["span"] or "-", format_solved(model["solved"]), per_seed,
                     f"{first('cue_separation'):.0e} -> {last('cue_separation'):.0e}", retention, size])
    variants = "".join(f"\n- {name}: {what}" for name, what in summary["variants"].items())
    return markdown_table(columns, rows, caption) + f"\nVariants:{variants}\n\n" + timeline(summary)
EARLY = 100_000  # frames drawn on a linear scale; beyond, logarithmic
TIMELINE = (0, 20_000, 100_000, 500_000)  # frames at which timeline() reads the probes, and the end


PRODUCT_UNTIL = 200_000  # retention x memory size is read over the probes up to here (before most runs' memory is gone)


def at(run: dict, frames: int) -> dict:
    """The run's first probe at or after `frames`."""
    return next(p for p in run["probes"] if p["frames"] >= frames)


def timeline(summary: dict) -> str:
    """What happens first and what follows: the Feedback runs' memory size, retention, cue
    separation and gradient to the cue at a few points of training, medians over the solved
    runs and over the failed ones; and retention x size over the early probes, constant where the
    memory's size alone sets how much of the cue a step keeps."""
    points = [*(frames for frames in TIMELINE if frames < summary["frames"]), summary["frames"]]
    caption = ("Over training, Feedback runs (median over the runs of each kind): memory size |m| (mean over the walk) / "
               "retention per step / cue separation at the doors / gradient reaching the cue step.")
    columns = ["variant", "doors", "span", "runs", *(f"{frames // 1000:,}k frames" for frames in points),
               f"retention x size, probes to {PRODUCT_UNTIL // 1000}k frames: median [IQR]"]
    rows = []
    for model in summary["models"]:
        if model["span"] is None:
            continue
        for kind, runs in (("solved", [r for r in model["runs"] if r["success"] >= SOLVED]), ("failed", [r for r in model["runs"] if r["success"] < SOLVED])):
            if not runs:
                continue
            cells = []
            for frames in points:
                probes = [at(run, frames) for run in runs]
                median = lambda value: float(np.median([value(p) for p in probes]))  # noqa: E731
                cells.append(f"{median(lambda p: np.mean(p['memory_norm'][1:])):.1f} / {median(lambda p: p['retention']):.2f} / "
                             f"{median(lambda p: p['cue_separation']):.0e} / {median(lambda p: p['gradient_to_cue']):.0e}")
            products = [p["retention"] * np.mean(p["memory_norm"][1:]) for run in runs for p in run["probes"] if p["frames"] <= PRODUCT_UNTIL]
            low, median, high = np.percentile(products, [25, 50, 75])
            cells.append(f"{median:.2f} [{low:.2f}, {high:.2f}]")
            rows.append([model["variant"], model["doors"], model["span"], f"{len(runs)} {kind}", *cells])
    return markdown_table(columns, rows, caption)
PANELS = [  # (title, value of a probe or None where the core has no such number, log scale)
    ("training success", lambda p: p["train_success"], False),
    ("cue separation at the doors", lambda p: p["cue_separation"], True),
    ("memory size |m_t| (mean over the walk)", lambda p: np.mean(p["memory_norm"][1:]) if "memory_norm" in p else None, False),
    ("retention of the cue part per step", lambda p: p.get("retention"), False),
    ("gradient reaching the cue step", lambda p: p["gradient_to_cue"], True),
    ("softmax(w) of the top layer", lambda p: p["layer_weights"][-1] if "layer_weights" in p else None, False),
]


def draw(summary: dict, out: Path) -> None:
    """A column per (variant, doors, span), the references last, a row per probed quantity over
    frames: each seed a line, solved runs green, failed red (a reference has no Feedback numbers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    columns = summary["models"]
    figure, axes = plt.subplots(len(PANELS), len(columns), figsize=(3.2 * len(columns), 2.2 * len(PANELS)), dpi=80, squeeze=False, sharex=True)
    for column, model in enumerate(columns):
        for row, (title, value, log) in enumerate(PANELS):
            ax = axes[row, column]
            if all(value(p) is None for run in model["runs"] for p in run["probes"]):
                ax.axis("off")  # a Feedback number on a reference's column
                continue
            for run in model["runs"]:
                frames = [p["frames"] for p in run["probes"]]
                values = [np.nan if value(p) is None else value(p) for p in run["probes"]]
                ax.plot(frames, values, color="#2a9d2a" if run["success"] >= SOLVED else "#d03030", linewidth=1, alpha=0.7)
            ax.set_xscale("symlog", linthresh=EARLY)  # the first updates, where the memory is lost, as wide as the rest
            ax.set_xlim(left=0)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1e6:g}M" if x >= 1e6 else f"{x / 1e3:g}k"))
            if log:
                ax.set_yscale("log")
            ax.grid(color="#e0e0e0", linewidth=0.8)
            span = f", span {model['span']}" if model["span"] else ""
            ax.set_title(f"{model['variant']}, {model['doors']} doors{span}" if row == 0 else "", fontsize=9, loc="left")
            if column == 0:
                ax.set_ylabel(title, fontsize=8)
            if row == len(PANELS) - 1:
                ax.set_xlabel("frames")
    for label, colour in (("solved", "#2a9d2a"), ("failed", "#d03030")):
        axes[0, 0].plot([], [], color=colour, label=label)
    save_figure(figure, axes[0, 0], out, fontsize=8, loc="upper left")


if __name__ == "__main__":
    main()
