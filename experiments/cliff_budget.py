"""Whether more training moves a memory-length cliff: each model of a sweep, run again at the first
length most of its seeds did not solve, with SCALE times the sweep's frames.

    python -m experiments.cliff_budget                                    # memory_length_recall's cliffs, 4x the frames, 3 seeds
    python -m experiments.cliff_budget --name memory_length_recall_ppo --models lstm gru --scale 2

Issue 50 asks each cliff of the memory-length curve for its cause, measured, and one cause it names
is the budget. For every model of the sweep NAME (experiments/memory_length.py's NAME.json) but the
floor (the MLP), its first failing length is the first of its lengths that most of its seeds did
not solve (where `memory_length.reach` stops). There, experiments/memory_length.py trains --seeds
new runs: the sweep's task, learner, budget and flags, the frames times --scale, in a runs folder
of their own. If the longer runs solve, the cliff was the budget; if they do not, more of the
same training does not move it (at that scale). A model that solved every length it ran has no
cliff here and is left out.

Writes NAME_budget.json (per model: the length, both budgets' frames, the sweep's greedy success
per seed there and the longer runs' per seed with their training time; the command, machine and
wall time) and NAME_budget.md after each model (`"complete": false` until the last), and keeps every finished run's records in NAME_budget_runs.json
as it goes (experiments/frame/ledger.py): commit it, and the same command resumes on another
machine without the run folders.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from durable.records import read_record, write_json, write_text
from envs.cli import positive_float, positive_int
from experiments import memory_length
from experiments.frame.flags import results_folder
from experiments.frame.jobs import ROOT
from experiments.frame.stats import seed_count
from experiments.frame.tables import markdown_table, minutes_per_run

NAME = "memory_length_recall"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default=NAME, help=f"the sweep: OUT/NAME.json (default {NAME})")
    parser.add_argument("--models", nargs="+", default=None, help="the sweep's models to run again (default: every one with a cliff)")
    parser.add_argument("--scale", type=positive_float, default=4.0, help="times the sweep's frames at that length (default: 4)")
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 (default: 3)")
    parser.add_argument("--out", type=Path, default=results_folder("memory_length"),
                        help="where NAME.json is and the results go (default: assets/memory_length/)")
    parser.add_argument("--runs-dir", type=Path, default=None, help="where the runs go (default: runs/experiments/NAME_budget)")
    parser.add_argument("--jobs", type=positive_int, default=None, help="runs at once (default: the CPU count)")
    parser.add_argument("--quick", action="store_true", help="tiny models and runs, to test the pipeline")
    return parser


def first_failing(model: dict) -> int | None:
    """The first of a sweep model's lengths that most of its seeds did not solve (None: it solved every one)."""
    for length, cell in sorted(model["lengths"].items(), key=lambda item: int(item[0])):
        if not memory_length.solved_by_most(cell):
            return int(length)
    return None


def sweep_flags(command: str, scale: float) -> list[str]:
    """experiments/memory_length.py's flags that make runs as the sweep's `command` made them (its
    task, learner and flags) with `scale` times its frames."""
    argv = shlex.split(command)[3:]  # "python -m experiments.memory_length ..."
    args = memory_length.make_parser().parse_args(argv)
    frames = ["--frames", str(round(args.frames * scale))] if args.frames else ["--budget", args.budget, "--frame-scale", str(args.frame_scale * scale)]
    optional = {"--rollout": args.rollout, "--entropy-coef": args.entropy_coef, "--num-minibatches": args.num_minibatches}
    return ["--env", args.env, "--doors", args.doors, "--algo", args.algo, "--eval-episodes", str(args.eval_episodes), *frames,
            *(token for flag, value in optional.items() if value is not None for token in (flag, str(value))),
            *([f"--train-args={args.train_args}"] if args.train_args else [])]


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    source = args.out / f"{args.name}.json"
    sweep = read_record(source)
    if sweep is None:
        parser.error(f"no sweep at {source}; give --name of an experiments.memory_length run (and --out where its JSON is)")
    unknown = [model for model in args.models or [] if model not in sweep["models"]]
    if unknown:
        parser.error(f"--models: {', '.join(unknown)} not in {source}; it has {', '.join(sweep['models'])}")
    cliffs = {model: first_failing(sweep["models"][model]) for model in args.models or sweep["models"] if model != memory_length.FLOOR}
    cliffs = {model: length for model, length in cliffs.items() if length is not None}
    if not cliffs:
        parser.error(f"no model of {source} has a length most of its seeds did not solve{' among --models' if args.models else ''}")
    runs_dir = args.runs_dir or ROOT / "runs" / "experiments" / f"{args.name}_budget"
    scratch = runs_dir / "sweeps"  # each model's memory_length output, merged below
    flags = sweep_flags(sweep["command"], args.scale)
    passed = [*(["--jobs", str(args.jobs)] if args.jobs else []), *(["--quick"] if args.quick else [])]
    started = time.time()
    result = {"command": "python -m experiments.cliff_budget " + shlex.join(sys.argv[1:]), "source": source.name, "scale": args.scale,
              "seeds": list(range(args.seeds)), "solved_at": memory_length.SOLVED, "complete": False, "models": {}}
    for model, length in cliffs.items():
        print(f"{model}: first failing length {length}; {args.seeds} runs at {args.scale:g}x its frames", flush=True)
        memory_length.main([*flags, "--models", model, "--lengths", str(length), "--seeds", str(args.seeds), "--no-estimate",
                            "--name", model, "--out", str(scratch), "--runs-dir", str(runs_dir),
                            "--ledger", str(args.out / f"{args.name}_budget_runs.json"), *passed])
        longer = read_record(scratch / f"{model}.json")
        result["machine"] = longer["machine"]
        cell, swept = longer["models"][model]["lengths"][str(length)], sweep["models"][model]["lengths"][str(length)]
        result["models"][model] = {
            "length": length, "frames": longer["frames"][str(length)], "sweep_frames": sweep["frames"][str(length)],
            "sweep_greedy_per_seed": [run["greedy_success"] for run in swept["per_seed"]], "sweep_solved": swept["solved"],
            "train_args": cell["train_args"], "per_seed": cell["per_seed"], "greedy": cell["greedy"], "solved": cell["solved"],
        }
        result["complete"] = len(result["models"]) == len(cliffs)
        write_results(result, args.out / args.name, started)  # after each model, so a stopped check keeps the models it finished
    print(table(result))


def write_results(result: dict, stem: Path, started: float) -> None:
    """STEM_budget.json and .md of the models done so far ("complete" once every one is)."""
    result["wall_seconds"] = round(time.time() - started, 1)
    write_json(stem.with_name(f"{stem.name}_budget.json"), result, indent=1)
    write_text(stem.with_name(f"{stem.name}_budget.md"), table(result))


def table(result: dict) -> str:
    """A row per model: its first failing length, the sweep's runs there, and the longer runs."""
    caption = (f"The first length most seeds of {result['source']} did not solve, per model, run again with {result['scale']:g}x "
               f"the frames ({len(result['seeds'])} seeds); solved: greedy success >= {result['solved_at']}."
               + ("" if result.get("complete", True) else " Under way: the models done so far."))
    solved = lambda s: f"{s['solved']} of {s['runs']}"  # noqa: E731
    rows = []
    for model, cell in result["models"].items():
        rows.append([model, cell["length"], f"{cell['sweep_frames']:,}", solved(cell["sweep_solved"]),
                     ", ".join(f"{x:.2f}" for x in cell["sweep_greedy_per_seed"]), f"{cell['frames']:,}", solved(cell["solved"]),
                     ", ".join(f"{run['greedy_success']:.2f}" for run in cell["per_seed"]),
                     minutes_per_run(run["training_seconds"] for run in cell["per_seed"])])
    columns = ["model", "L", "sweep's frames", "sweep solved", "sweep greedy per seed", "longer frames", "longer solved",
               "longer greedy per seed", "training time per run"]
    return markdown_table(columns, rows, caption)


if __name__ == "__main__":
    main()
