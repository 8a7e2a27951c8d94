"""Figure 3 of the paper at CPU scale: success on the corridor against the attention span.

    python -m experiments.corridor_span                  # spans 1..8, feedback and transformer, lstm and mlp, 3 seeds, 3M frames

The claim: a Transformer that sees `span` steps back in each of its `n_layers` layers reaches at
most span x layers steps into the past, so it fails once that is shorter than the corridor
(the cue is shown only at the first cell); the Feedback Transformer's memory is recurrent (every
step's memory vector is made from all layers of the step before), so it can carry the cue at any
span. Each (core, span, seed) is a `train_a2c.py` run of `--preset` (cpu by default) with `--core-opt
span=S,n_layers=2` on a corridor of `--length` cells (time limit 4 x length) for `--frames` env
frames, with rollouts of `--rollout` steps (the BPTT length: gradients do not cross a rollout's
start), then `evaluate.py --greedy` (success rate over `--eval-episodes`), and the cue separation
at the doors of its final policy and of a fresh one (cue_memory.py: whether the core still holds
the cue where it is needed, whatever the policy does with it). The LSTM and the MLP (no memory)
are reference lines (and the other recurrent cores, --references). `--cores gtrxl` is the Transformer
with GTrXL's gated layers (`--core-opt gating=gru`, agents/cores/gtrxl.py), in a run folder and row
of its own; `--cores feedback-carry` the Feedback core with its gated carry (`--core-opt
carry=gate`, agents/cores/feedback/reference.py: a memory that keeps its cue), `--cores
feedback-tanh` the one with its tanh write read raw and `--cores feedback-kept` the one with its
kept vector (`keep_slot=True`), likewise. The agents
see the observation only (`--no-previous-inputs`): an agent fed its own last action can carry the
cue in its behaviour, which attention of any reach can read (`--previous-inputs` gives them that
input, as the other experiments do). The entropy cost is 0.01, 20 times the presets': once a small-
span Feedback Transformer holds the cue, its policy can fall into a trap where, for one cue, it
plays a door action (a no-op) all along the corridor and never reaches the doors, which only the
discount punishes; more entropy keeps it trying to walk
(README, Figure 3). Writes NAME.json (raw per-seed numbers), NAME.md and NAME.png.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np

from agents.config.a2c_config import preset_values
from agents.plot_curves import save_figure
from agents.config.ppo_config import PPOConfig
from durable.records import write_json, write_text
from envs.cli import non_negative_float, positive_int
from experiments.frame.flags import KEEPING_OPTIONS, Distinct, QUICK_ALGO, QUICK_CORE, QUICK_FRAMES, add_experiment_arguments, as_published, minibatch_args, output_name, run_frames, runs_folder
from experiments.cue_memory import run_cue_separation
from experiments.frame.curves import training_seconds
from experiments.frame.estimate import print_expected_time
from experiments.frame.jobs import EVAL_SEED, ROOT, evaluate_job, evaluation, train_job
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.stats import iqm_interval, seed_count, solved_interval
from experiments.frame.tables import format_interval, format_solved, markdown_table, minutes_per_run

LAYERS = 2
SOLVED = 0.95  # greedy success at which a run counts as having solved the corridor (a run that has not: 0.5 or less)
QUICK_TRAIN = ["--num-envs", "4"]
# --cores choice -> (train_a2c.py --core, its options beside span and n_layers)
ATTENTION = {"feedback": ("feedback", ""), "transformer": ("transformer", ""), "gtrxl": ("transformer", ",gating=gru"),
             **{f"feedback-{name}": ("feedback", f",{keep}") for name, keep in KEEPING_OPTIONS.items()}}


def trained_core(core: str) -> str:
    """The train_a2c.py core of a --cores or --references choice."""
    return ATTENTION[core][0] if core in ATTENTION else core


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", nargs="+", type=positive_int, action=Distinct, default=[1, 2, 4, 8])
    parser.add_argument("--cores", nargs="*", choices=list(ATTENTION), action=Distinct, default=["feedback", "transformer"],
                        help="attention cores run at each span; gtrxl: the transformer with gating=gru; feedback-carry: the Feedback core with its gated "
                             "carry (carry=gate, keep_t_max at its default, 100); feedback-tanh: with its tanh write read raw; feedback-kept: with its kept vector "
                             "(default: feedback transformer; none: the references alone)")
    parser.add_argument("--references", nargs="*", choices=["lstm", "gru", "ffm", "lru", "mamba", "mlp"], action=Distinct, default=["lstm", "mlp"],
                        help="cores without a span, run once each (default: lstm mlp)")
    parser.add_argument("--length", type=positive_int, default=8,
                        help="corridor cells (default: 8: the transformer's reach, 2 x span, falls short at spans 1 and 2)")
    parser.add_argument("--preset", choices=["cpu", "paper"], default="cpu",
                        help="train_a2c.py preset (default: cpu; paper: the maze's settings, which the paper's corridor does not give)")
    parser.add_argument("--rollout", type=positive_int, default=None, help="steps per update, the BPTT length (default: the preset's, 32 or 100)")
    parser.add_argument("--frames", type=positive_int, default=None, help=f"env frames per run (default: 3,000,000; {QUICK_FRAMES:,} with --quick)")
    parser.add_argument("--previous-inputs", action="store_true", help="feed the agents their previous action and reward too")
    parser.add_argument("--entropy-coef", type=non_negative_float, default=0.01,
                        help="entropy cost (default: 0.01, 20 x the presets': see the module docstring)")
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 (default: 3)")
    parser.add_argument("--eval-episodes", type=positive_int, default=100, help="greedy evaluation episodes (default: 100)")
    add_experiment_arguments(parser, None, "output file stem (default: corridor_span, or corridor_span_ppo with --algo ppo)",
                             "runs/experiments/corridor_span/[paper-]L{length}-T{rollout}[-obs]-ent{entropy}", algo=True, minibatches=True, folder="corridor_span")
    add_launcher_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    minibatches = minibatch_args(parser, args)
    args.frames = run_frames(args, 3_000_000)
    args.name = output_name(args, "corridor_span")
    seeds = list(range(args.seeds))
    args.rollout = args.rollout or preset_values("corridor", "feedback", args.preset)[0]["rollout"]
    inputs = "" if args.previous_inputs else "-obs"
    preset = ("" if args.algo == "a2c" else f"{args.algo}-") + (f"mb{args.num_minibatches}-" if minibatches else "") + ("" if args.preset == "cpu" else f"{args.preset}-")
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / "corridor_span" / f"{preset}L{args.length}-T{args.rollout}{inputs}-ent{args.entropy_coef:g}")
    env_args = ["--env", "corridor", "--env-opt", f"length={args.length},max_episode_steps={4 * args.length}",
                "--preset", args.preset, "--rollout", str(args.rollout), "--previous-inputs" if args.previous_inputs else "--no-previous-inputs", "--entropy-coef", str(args.entropy_coef), *minibatches]
    # (core, span or None) -> train_a2c.py arguments of that model
    models = {(core, span): ["--core", ATTENTION[core][0], "--core-opt", f"span={span},n_layers={LAYERS}{ATTENTION[core][1]}"]
              for core in args.cores for span in args.spans}
    models.update({(core, None): ["--core", core, *as_published(core)] for core in args.references})
    cells = [(model, seed) for seed in seeds for model in models]
    run_dir = {(model, seed): runs_dir / model[0] / (f"span{model[1]}" if model[1] else "") / f"seed{seed}" for model, seed in cells}
    quick_algo = [] if minibatches else QUICK_ALGO[args.algo]  # an explicit --num-minibatches wins
    quick = lambda core: [*QUICK_TRAIN, *quick_algo, "--core-opt", QUICK_CORE[trained_core(core)]] if args.quick else []  # noqa: E731
    training = [train_job(f"{model} seed {seed}", run_dir[model, seed],
                          [*env_args, *models[model], "--seed", str(seed), *quick(model[0])], args.frames, args.algo) for model, seed in cells]
    evaluations = {cell: evaluate_job(run_dir[cell], 2 if args.quick else args.eval_episodes, args.frames, greedy=True) for cell in cells}
    print(f"{len(cells)} runs of {args.frames:,} frames on a corridor of {args.length} cells, {where_runs_go(args)}, in {runs_dir}")
    if not (args.quick or args.no_estimate):
        print_expected_time(training, args.jobs)
    run_stages({"training": training, "evaluation": list(evaluations.values())}, args)

    summary = {
        "command": "python -m experiments.corridor_span " + shlex.join(sys.argv[1:]), "machine": launcher_description(args),
        "algo": args.algo, "num_minibatches": args.num_minibatches, "preset": args.preset, "entropy_coef": args.entropy_coef, "length": args.length, "layers": LAYERS, "rollout": args.rollout, "frames": args.frames, "seeds": seeds,
        "previous_inputs": args.previous_inputs,
        "eval": f"{args.eval_episodes} greedy episodes per run, evaluation env streams of seed {EVAL_SEED}", "models": {},
    }
    for (core, span) in models:
        results = [evaluation(evaluations[(core, span), seed]) for seed in seeds]
        success = np.array([r["agent"]["success"] for r in results])
        separation = [run_cue_separation(str(run_dir[(core, span), s])) for s in seeds]
        summary["random_success"] = results[0]["random"]["success"]
        summary["models"][f"{core}/span{span}" if span else core] = {
            "core": core, "span": span, "reach": span * LAYERS if span and trained_core(core) == "transformer" else None,
            "per_seed": [{"seed": s, "success": float(v), "cue_separation": cue["trained"], "cue_separation_fresh": cue["fresh"],
                          "training_seconds": round(training_seconds(run_dir[(core, span), s]), 1)}
                         for s, v, cue in zip(seeds, success, separation)],
            "success": iqm_interval({"x": success})["x"],
            "solved": solved_interval(success, SOLVED),
        }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", summary, indent=1)
    write_text(args.out / f"{args.name}.md", table(summary))
    draw(summary, args.out / f"{args.name}.png")
    print(table(summary))



def table(summary: dict) -> str:
    inputs = "their previous action and reward too" if summary.get("previous_inputs", True) else "the observation only"
    learner = {"a2c": "A2C", "ppo": f"PPO ({summary.get('num_minibatches') or PPOConfig.num_minibatches} minibatches per epoch)"}[summary.get("algo", "a2c")]
    caption = (f"Greedy success rate on a corridor of {summary['length']} cells after {summary['frames']:,} frames of {learner} "
               f"(rollouts of {summary['rollout']} steps; the agents see {inputs}): IQM over seeds [95% bootstrap CI], then "
               "each seed, and each seed's cue separation at the doors (experiments/cue_memory.py: about 1e-7 is none left, "
               "float32 noise; around 1, the cue is a large part of the core's output), trained (fresh).")
    columns = ["model", "span", "transformer reach (span x 2)", "success: IQM [95% CI]",
               f"solved (success >= {SOLVED}): runs, probability [Wilson 95% CI]", "per seed", "cue separation per seed, trained (fresh)",
               "training time per run"]
    rows = []
    for model in summary["models"].values():
        seeds = ", ".join(f"{run['success']:.2f}" for run in model["per_seed"])
        cues = ", ".join(f"{run['cue_separation']:.0e} ({run['cue_separation_fresh']:.0e})" for run in model["per_seed"])
        rows.append([model["core"], model["span"] or "-", model["reach"] or "-", format_interval(model["success"]), format_solved(model["solved"]),
                     seeds, cues, minutes_per_run(run["training_seconds"] for run in model["per_seed"])])
    return markdown_table(columns, rows, caption) + f"\nRandom policy: {summary['random_success']:.2f}.\n"
def draw(summary: dict, out: Path) -> None:
    """Success against span (log scale): IQM with 95% intervals per attention core; references
    as horizontal bands; a dotted line where the transformer's reach equals the corridor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    cores = sorted({m["core"] for m in summary["models"].values() if m["span"]})
    for offset, core in zip(np.linspace(-0.04, 0.04, len(cores)), cores):
        models = sorted((m for m in summary["models"].values() if m["core"] == core), key=lambda m: m["span"])
        spans = np.array([m["span"] for m in models], dtype=float)
        iqm = np.array([m["success"]["iqm"] for m in models])
        low, high = np.array([m["success"]["ci_low"] for m in models]), np.array([m["success"]["ci_high"] for m in models])
        x = spans * 2**offset  # side by side, not on top of each other
        axes.errorbar(x, iqm, yerr=[iqm - low, high - iqm], marker="o", capsize=3, linewidth=2, label=core)
    for style, (name, model) in zip(("--", ":", "-.", (0, (1, 4)), (0, (5, 5))), ((n, m) for n, m in summary["models"].items() if not m["span"])):
        s = model["success"]
        line = axes.axhline(s["iqm"], linestyle=style, linewidth=1.2, color="#555555", label=f"{name} ({s['iqm']:.2f})")
        axes.axhspan(s["ci_low"], s["ci_high"], color=line.get_color(), alpha=0.1)
    axes.axvline(summary["length"] / summary["layers"], color="#999999", linestyle=":", linewidth=1)
    axes.text(summary["length"] / summary["layers"], 0.02, " span x 2 = corridor", fontsize=8, color="#777777")
    axes.set_xscale("log", base=2)
    spans = sorted({m["span"] for m in summary["models"].values() if m["span"]})
    axes.set_xticks(spans, [str(span) for span in spans])
    axes.minorticks_off()
    axes.set_xlabel("attention span (memory size)")
    axes.set_ylabel("greedy success rate")
    axes.set_ylim(-0.02, 1.02)
    axes.set_title(f"corridor of {summary['length']} cells, {summary['frames']:,} frames, {len(summary['seeds'])} seeds", loc="left", fontsize=11)
    save_figure(figure, axes, out, fontsize=8, loc="lower right")


if __name__ == "__main__":
    main()
