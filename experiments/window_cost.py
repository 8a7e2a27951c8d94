"""What a gradient window that follows the episode costs: training time to solve a recall task with
`--bptt episode`, a fixed window covering every phase, and rollouts aligned to the episode.

    python -m experiments.window_cost                     # MemoryLength, L = 64 and 256, 3 seeds, the LSTM with chrono gates
    python -m experiments.window_cost --env tmaze --lengths 64

The envs: MemoryLength (envs/memory_length.py, bsuite's memory_len: recall one bit after L steps,
no exploration needed; the default) or the passive T-maze (envs/tmaze.py, where the turn must be
found first). Both have episodes of L + 1 steps, which with the reset step of NEXT_STEP autoreset
begin every L + 2 steps in lockstep. Three ways for every decision's gradient to reach its cue, L
steps back, on the same A2C learner and core:
- `episode`: 32-step rollouts, `--bptt episode` (agents/learners/window.py: each env's running episode);
- `covering`: 32-step rollouts, `--bptt L + 32`, a fixed window that covers the episode at every
  phase (it stores L steps before each rollout);
- `aligned`: rollouts of L + 2 steps, one whole episode each, and no window: the rollout is the
  episode, but an update comes once an episode instead of every 32 steps.
An update of the first two costs about the same (H + 33 steps recomputed, H <= L stored); the
third makes 32 / (L + 2) as many updates per frame, each over L + 3 steps.

Each run trains the CPU preset's LSTM with chrono initialisation (gate_init=chrono, T_max twice
the episode: the initialisation that reached these lengths on the recall task in the issue's
one-seed probe), on the observation only, for the length's frames. The measure is its training time to solve: the training seconds (acting and
learning, from the frames per second logged at every update: experiments/frame/curves.py) until the
success rate of the episodes that ended over the last 4 (L + 2) x B frames first reaches 0.95.
Writes NAME.json (per-seed seconds, frames and updates to solve, seconds per update, commands,
machine) and NAME.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from agents.config.a2c_config import preset_values
from agents.plot_curves import read_scalars
from durable.records import write_json, write_text
from envs.cli import positive_int
from experiments.frame.flags import Distinct, add_experiment_arguments, run_frames, runs_folder
from experiments.frame.estimate import print_expected_time
from experiments.frame.jobs import ROOT, train_job
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.stats import iqm_interval, seed_count
from experiments.frame.tables import format_interval, markdown_table

SOLVED = 0.95  # training success over the recent episodes at which a run counts as solved
RECENT_EPISODES_PER_ENV = 4  # the success rate is over the episodes of the last 4 (L + 2) x B frames
MODES = ("episode", "covering", "aligned")
FRAMES = {64: 1_500_000, 256: 3_000_000}  # per length, from the one-seed probe (recall, LSTM with chrono gates, A2C)
ENVS = ("memory_length", "tmaze")
ROLLOUT = 32


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", choices=ENVS, default=ENVS[0], help=f"the task (default: {ENVS[0]})")
    parser.add_argument("--lengths", nargs="+", type=positive_int, action=Distinct, default=sorted(FRAMES))
    parser.add_argument("--modes", nargs="+", choices=MODES, action=Distinct, default=list(MODES))
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 (default: 3)")
    parser.add_argument("--frames", type=positive_int, default=None,
                        help=f"env frames per run at every length (default: {', '.join(f'{k}: {v:,}' for k, v in FRAMES.items())}; "
                             "others take the longest's)")
    add_experiment_arguments(parser, None, "output file stem (default: window_cost_ENV)", folder="window_cost")
    add_launcher_arguments(parser)
    return parser


def frames_at(args: argparse.Namespace, length: int) -> int:
    return run_frames(args, FRAMES.get(length, max(FRAMES.values())))


def train_args(env: str, mode: str, length: int, seed: int, quick: bool) -> list[str]:
    """train_a2c.py's flags for one run (the frames, run folder and threads come from the job)."""
    window = {"episode": ["--rollout", str(ROLLOUT), "--bptt", "episode"],
              "covering": ["--rollout", str(ROLLOUT), "--bptt", str(length + ROLLOUT)],
              "aligned": ["--rollout", str(length + 2)]}[mode]
    options = f"gate_init=chrono,t_max={2 * (length + 1)}" + (",hidden_size=8" if quick else "")
    return ["--env", env, "--env-opt", f"length={length}", "--preset", "cpu", "--no-previous-inputs", "--core", "lstm",
            "--core-opt", options, *window, "--seed", str(seed), *(["--num-envs", "4"] if quick else [])]


def to_solve(run_dir: Path, length: int, num_envs: int) -> dict[str, float | int | None]:
    """The run's training seconds, frames and updates until its recent success first reached
    SOLVED (None each where it never did), its seconds per update and its whole training time."""
    steps, success = read_scalars(str(run_dir), "charts/success")
    sps_steps, frames_per_second = read_scalars(str(run_dir), "charts/SPS")
    seconds = np.cumsum(np.diff(sps_steps, prepend=0) / frames_per_second)  # after each update
    span = RECENT_EPISODES_PER_ENV * (length + 2) * num_envs
    recent = np.array([success[(steps > step - span) & (steps <= step)].mean() for step in steps])
    reached = np.flatnonzero((recent >= SOLVED) & (steps >= span))
    at = int(steps[reached[0]]) if len(reached) else None
    update = None if at is None else int(np.searchsorted(sps_steps, at)) + 1
    return {"seconds_to_solve": None if at is None else round(float(seconds[update - 1]), 1), "frames_to_solve": at,
            "updates_to_solve": update, "seconds_per_update": round(float(seconds[-1] / len(seconds)), 4),
            "training_seconds": round(float(seconds[-1]), 1), "updates": len(seconds)}


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    args.name = args.name or f"window_cost_{args.env}"
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / args.name)
    seeds, lengths = list(range(args.seeds)), sorted(args.lengths)
    runs = [(length, mode, seed) for length in lengths for mode in args.modes for seed in seeds]
    run_dir = {run: runs_dir / f"L{run[0]}" / run[1] / f"seed{run[2]}" for run in runs}
    training = [train_job(f"L{length} {mode} seed {seed}", run_dir[length, mode, seed], train_args(args.env, mode, length, seed, args.quick),
                          frames_at(args, length)) for length, mode, seed in runs]
    print(f"{len(runs)} runs ({len(lengths)} lengths x {len(args.modes)} modes x {len(seeds)} seeds), {where_runs_go(args)}, in {runs_dir}")
    if not (args.quick or args.no_estimate):
        print_expected_time(training, args.jobs)
    started = time.time()
    run_stages({"training": training}, args)

    num_envs = 4 if args.quick else preset_values(args.env, "lstm", "cpu")[0].get("num_envs", 64)
    summary = {
        "command": "python -m experiments.window_cost " + shlex.join(sys.argv[1:]), "machine": launcher_description(args),
        "env": args.env, "core": "lstm, gate_init=chrono, t_max = 2 (L + 1), the CPU preset", "solved_at": SOLVED,
        "solved_means": f"training success over the episodes of the last {RECENT_EPISODES_PER_ENV} (L + 2) x {num_envs} frames",
        "frames": {str(length): frames_at(args, length) for length in lengths}, "seeds": seeds,
        "wall_seconds_this_invocation": round(time.time() - started, 1), "lengths": {},
    }
    for length in lengths:
        cells = summary["lengths"].setdefault(str(length), {})
        for mode in args.modes:
            per_seed = [{"seed": seed, **to_solve(run_dir[length, mode, seed], length, num_envs)} for seed in seeds]
            solved = [run["seconds_to_solve"] for run in per_seed if run["seconds_to_solve"] is not None]
            cells[mode] = {"train_args": train_args(args.env, mode, length, 0, args.quick)[:-2] if not args.quick else None,
                           "per_seed": per_seed, "solved": len(solved), "runs": len(seeds),
                           "seconds_per_update": iqm_interval({"x": np.array([run["seconds_per_update"] for run in per_seed])})["x"],
                           "seconds_to_solve": iqm_interval({"x": np.array(solved)})["x"] if len(solved) == len(seeds) else None}
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", summary, indent=1)
    write_text(args.out / f"{args.name}.md", table(summary))
    print(table(summary))


def table(summary: dict) -> str:
    task = {"memory_length": "MemoryLength (recall one bit)", "tmaze": "the passive T-maze"}[summary["env"]]
    caption = (f"Training time to solve {task} (success >= {summary['solved_at']}, {summary['solved_means']}), "
               f"{summary['core']}, A2C; frames per length: " + ", ".join(f"{k}: {v:,}" for k, v in summary["frames"].items())
               + f"; {len(summary['seeds'])} seeds, IQM [95% bootstrap CI] where every seed solved.")
    columns = ["L", "window", "solved", "seconds to solve (IQM)", "seconds to solve per seed", "updates to solve per seed", "seconds per update (IQM)"]
    rows = []
    for length, cells in summary["lengths"].items():
        for mode, cell in cells.items():
            interval = cell["seconds_to_solve"]
            per_seed = ", ".join("-" if run["seconds_to_solve"] is None else f"{run['seconds_to_solve']:.0f}" for run in cell["per_seed"])
            updates = ", ".join("-" if run["updates_to_solve"] is None else str(run["updates_to_solve"]) for run in cell["per_seed"])
            rows.append([length, mode, f"{cell['solved']} of {cell['runs']}", format_interval(interval, 0) if interval else "-", per_seed, updates,
                         format_interval(cell["seconds_per_update"], 3)])
    return markdown_table(columns, rows, caption)
if __name__ == "__main__":
    main()
