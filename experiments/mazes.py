"""The mazes of the paper (Figures 4 and 6) at a CPU budget: memory cores side by side.

    python -m experiments.mazes                          # maze, easy maze, water maze x 4 cores x 3 seeds
    python -m experiments.mazes --envs maze_easy water_maze --cores feedback lstm --name mazes_rmsprop --train-args "--head-init orthogonal"

Every (env, core, seed) is one `train_a2c.py` run with the chosen preset (`cpu` by default) for
`--frames` env frames, then `evaluate.py` on its final checkpoint: `--eval-episodes` episodes
with sampled actions, memory reset at episode starts, env seeds disjoint from training's. Runs go
in parallel processes (`--jobs`, one thread each) under `--runs-dir`; run the same command again
after an interruption and it continues (finished runs are kept, unfinished ones resume from
their checkpoint). Writes to `--out` (assets/mazes/ by default):

    NAME.json        config, and per env: random and oracle returns (no oracle for envs
                     other than ours), per core the raw per-seed numbers (evaluation return and
                     metric, final and best training return, training seconds) and the IQMs with
                     their 95% stratified-bootstrap intervals
    NAME.md          the table of the above
    NAME_ENV.png     training return against frames: IQM over seeds, 95% band, random and oracle

The best training return is the highest of the curve's CURVE_BINS bins (each the mean return of
the episodes that ended in it): POPGym's MMER (max over training of the mean episode return), on
our bins instead of its train batches.
"""

from __future__ import annotations

import argparse
import shlex
import sys

import numpy as np

import envs
from agents.cores import CORES
from durable.records import write_json, write_text
from envs.cli import env_name, positive_int
from experiments.frame import flags
from experiments.frame.flags import Distinct, QUICK_ALGO, QUICK_FRAMES, add_experiment_arguments, as_published, output_name, run_frames, runs_folder
from experiments.frame.curves import binned_curve, draw_curves, training_seconds
from experiments.frame.estimate import print_expected_time
from experiments.frame.jobs import EVAL_SEED, ROOT, evaluate_job, evaluation, train_job
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.maze_memory import FAR, WINDOW, memory_probe
from experiments.frame.stats import iqm_interval, seed_count
from experiments.frame.tables import format_interval, markdown_table, minutes_per_run
from experiments.frame.train_flags import split_train_args

ENVS = ("maze", "maze_easy", "water_maze")
CORE_NAMES = ("feedback", "transformer", "lstm", "mlp")
BASELINES = ("random", "oracle")  # evaluate.py's policies beside the agent; only ours have an oracle
CURVE_BINS = 40
PROBED = ("maze", "maze_easy")  # envs whose runs get experiments/maze_memory.py's probe
# --quick: a smoke test of the whole pipeline in seconds (tests/experiments), nothing learned.
QUICK_TRAIN = ["--num-envs", "4", "--rollout", "8"]
QUICK_CORE = {**flags.QUICK_CORE, **{core: "d_model=16,n_heads=2,span=8" for core in ("feedback", "transformer", "reservoir")}}  # every --cores choice


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", type=env_name, action=Distinct, key=envs.short_name, default=list(ENVS), metavar="ENV",
                        help=f"our short names {sorted(envs.ENV_IDS)} or any Gymnasium id, module:EnvId form included (default: {' '.join(ENVS)})")
    parser.add_argument("--cores", nargs="+", choices=sorted(CORES), action=Distinct, default=list(CORE_NAMES), metavar="CORE")
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 per (env, core) (default: 3)")
    parser.add_argument("--frames", type=positive_int, default=None, help=f"env frames per run (default: 2,000,000; {QUICK_FRAMES:,} with --quick)")
    parser.add_argument("--preset", choices=["cpu", "paper"], default="cpu", help="train_a2c.py preset (default: cpu)")
    parser.add_argument("--train-args", default="", help='more train_a2c.py flags for every run, e.g. "--head-init orthogonal"')
    parser.add_argument("--eval-episodes", type=positive_int, default=100, help="evaluation episodes per run (default: 100)")
    add_experiment_arguments(parser, None, "output file stem and run folder (default: mazes, or mazes_ppo with --algo ppo)",
                             quick="tiny runs and evaluations", algo=True, folder="mazes")
    add_launcher_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    extra = split_train_args(parser, args.train_args)  # an open quote: exit 2 before anything is written
    args.frames = run_frames(args, 2_000_000)
    args.name = output_name(args, "mazes")
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / args.name)
    if args.quick:
        args.eval_episodes = 2
    seeds = list(range(args.seeds))
    cells = [(env, core, seed) for seed in seeds for env in args.envs for core in args.cores]
    run_dir = {cell: runs_dir / envs.short_name(cell[0]) / cell[1] / f"seed{cell[2]}" for cell in cells}
    print(f"{len(cells)} runs of {args.frames:,} frames ({args.preset} preset), {where_runs_go(args)}, in {runs_dir}")

    training = []
    for env, core, seed in cells:
        train_args = ["--env", env, "--core", core, *as_published(core), "--preset", args.preset, "--seed", str(seed), *extra]
        if args.quick:
            train_args += QUICK_TRAIN + QUICK_ALGO[args.algo] + ["--core-opt", QUICK_CORE[core]]
        training.append(train_job(f"train {env}/{core}/seed{seed}", run_dir[env, core, seed], train_args, args.frames, args.algo))
    evaluations = {cell: evaluate_job(run_dir[cell], args.eval_episodes, args.frames) for cell in cells}
    if not (args.quick or args.no_estimate):
        print_expected_time(training, args.jobs)
    run_stages({"training": training, "evaluation": list(evaluations.values())}, args)

    summary = summarise(args, seeds, run_dir, evaluations)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", summary, indent=1)
    write_text(args.out / f"{args.name}.md", table(summary))
    for env in args.envs:
        curves = {core: np.stack([binned_curve(run_dir[env, core, s], "charts/episodic_return", args.frames, CURVE_BINS) for s in seeds])
                  for core in args.cores}
        baselines = summary["envs"][env]
        lines = {name: baselines[name]["return"] for name in BASELINES if name in baselines}
        draw_curves(curves, args.frames, lines, f"{env}, {args.preset} preset", "episode return", args.out / f"{args.name}_{envs.short_name(env)}.png")
    print(table(summary))
    print(f"wrote {args.out / args.name}.json, .md and _ENV.png")


def summarise(args, seeds, run_dir, evaluation_jobs) -> dict:
    """Per env: the baselines, and per core the raw per-seed numbers and their IQM and interval."""
    summary = {
        "command": "python -m experiments.mazes " + shlex.join(sys.argv[1:]),
        "machine": launcher_description(args),
        "algo": args.algo, "preset": args.preset, "train_args": args.train_args, "frames": args.frames, "seeds": seeds, "eval_episodes": args.eval_episodes,
        "eval_seed": EVAL_SEED, "actions": "sampled", "envs": {},
    }
    for env in args.envs:
        cores, baselines = {}, None
        for core in args.cores:
            per_seed = []
            for seed in seeds:
                results = evaluation(evaluation_jobs[env, core, seed])
                baselines = {name: results[name] for name in BASELINES if name in results}
                curve = binned_curve(run_dir[env, core, seed], "charts/episodic_return", args.frames, CURVE_BINS)
                per_seed.append({
                    "seed": seed,
                    "eval": results["agent"],
                    "final_training_return": None if np.isnan(curve[-1]) else float(curve[-1]),
                    "best_training_return": float(np.nanmax(curve)),
                    "training_seconds": round(training_seconds(run_dir[env, core, seed]), 1),
                })
                if envs.short_name(env) in PROBED:
                    per_seed[-1]["memory_probe"] = memory_probe(str(run_dir[env, core, seed]))
            returns = np.array([run["eval"]["return"] for run in per_seed])
            best = np.array([run["best_training_return"] for run in per_seed])
            cores[core] = {"per_seed": per_seed, "eval_return": iqm_interval({core: returns})[core],
                           "best_training_return": iqm_interval({core: best})[core]}
            if envs.short_name(env) in PROBED:
                for key in ("gain", "far_gain"):
                    cores[core][f"memory_{key}"] = iqm_interval({core: np.array([run["memory_probe"][key] for run in per_seed])})[core]
        summary["envs"][env] = {**baselines, "cores": cores}
    return summary


def table(summary: dict) -> str:
    """Markdown: one row per (env, core), and the memory probe's per probed (env, core)."""
    caption = (f"Evaluation return after {summary['frames']:,} frames ({summary['preset']} preset), {summary['eval_episodes']} episodes "
               f"per seed ({summary['actions']} actions): IQM over seeds [95% bootstrap CI], then each seed.")
    columns = ["env", "core", "return: IQM [95% CI]", "per seed", "best training return: IQM [95% CI]", "random", "oracle", "training time per run"]
    rows = []
    for env, result in summary["envs"].items():
        for core, numbers in result["cores"].items():
            seeds = ", ".join(f"{run['eval']['return']:.2f}" for run in numbers["per_seed"])
            oracle = f"{result['oracle']['return']:.2f}" if "oracle" in result else "-"
            rows.append([env, core, format_interval(numbers["eval_return"]), seeds, format_interval(numbers["best_training_return"]),
                         f"{result['random']['return']:.2f}", oracle, minutes_per_run(run["training_seconds"] for run in numbers["per_seed"])])
    text = markdown_table(columns, rows, caption)
    probed = [(env, result) for env, result in summary["envs"].items() if envs.short_name(env) in PROBED]
    if not probed:
        return text
    caption = (f"Memory probe (experiments/maze_memory.py): targets reached within {WINDOW} steps, seen before they "
               f"were given against never seen; the gain is the difference, the far gain the same over targets {FAR}+ steps "
               "away. IQM over seeds [95% bootstrap CI], then each seed's far gain.")
    columns = ["env", "core", "reached: seen / unseen (mean over seeds)", "gain: IQM [95% CI]", "far gain: IQM [95% CI]", "far gain per seed"]
    rows = []
    for env, result in probed:
        for core, numbers in result["cores"].items():
            probes = [run["memory_probe"] for run in numbers["per_seed"]]
            seen, unseen = np.mean([p["seen_reached"] for p in probes]), np.mean([p["unseen_reached"] for p in probes])
            far = ", ".join(f"{p['far_gain']:+.2f}" for p in probes)
            rows.append([env, core, f"{seen:.2f} / {unseen:.2f}", format_interval(numbers["memory_gain"]),
                         format_interval(numbers["memory_far_gain"]), far])
    return text + "\n" + markdown_table(columns, rows, caption)
if __name__ == "__main__":
    main()
