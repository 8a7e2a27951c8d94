"""What carrying one bit L steps costs to learn: frames to solve the recall task against L, every core.

    python -m experiments.frames_to_solve --jobs 2                       # A2C, every model, L = 1, 2, 4, ... 1,024
    python -m experiments.frames_to_solve --algo ppo --seeds 3 --lengths 1 2 4 8 16 32 64 128 256 --jobs 2
    python -m experiments.frames_to_solve --models gru-chrono --lengths 2048 --seeds 3   # past 1,024: 4x the median of L/2
    python -m experiments.frames_to_solve --algo dqn --models lstm-chrono gru-chrono --lengths 16 32 64 --seeds 3   # train_dqn.py

The task is bsuite's memory_len (FeedbackRL/MemoryLength-v0, envs/memory_length.py): one bit
shown at the first step, asked for at the last of L + 1 steps, nothing to explore, and here
without the clock (`show_time=False`: the query marks the decision step), so that a policy means
the same thing at every length and can be tried at lengths it never trained on. Each (model,
length, seed) is a train_a2c.py (or train_ppo.py, train_dqn.py) run of the memory-length sweep's settings
(experiments/memory_length.py: the CPU preset, the observation only, a gradient window that
follows the episode, the same models and initialisations) with the trainers' solve check
(agents/learners/solve.py): every so often the greedy policy plays 100 evaluation episodes; the
first check at success >= 0.95 that a second check on fresh episodes confirms ends the run, and
its frames, episodes and wall seconds are the run's cost. A run that reaches its cap unsolved is
censored there: its cost is more than the cap, a lower bound.

The cap, the same for every core: 40,000 episodes a run up to L = 256 (four times bsuite's
10,000), 12M frames from 512 (four times the old sweep's 3M), and past 1,024 four times the
median frames the same model needed at L/2 in this sweep (a length past 1,024 is run only where
that median is known). Checks come after 200 episodes' frames, then at least 200 episodes and
10% of the frames trained apart, so the frames to solve are read to within about 10%.

Lengths run in turn, shortest first; a model's sweep stops after `--stop-after` lengths in a row
(default 2) at which no seed solves; the MLP, the control with no memory, runs to L = 16, never stopped.
After each run, experiments/past_length.py tries a solved run's final policy at L/2, 2L, 4L, 8L.

Writes NAME.json (per run: frames, episodes and seconds to solve or the censoring cap, every
check, the success at other lengths, training seconds; per cell its train args, window and
initialisation; the command, machine and wall time), NAME.md, and NAME_runs.json as it goes, the
ledger (experiments/frame/ledger.py) from which a stopped sweep resumes, here or elsewhere.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from durable.records import read_record, write_json, write_text
from envs.cli import positive_int
from experiments.frame.calls import every_call
from experiments.frame.estimate import print_expected_time, write_estimate
from experiments.frame.flags import Distinct, QUICK_ALGO, add_experiment_arguments, minibatch_args, output_name, runs_folder
from experiments.frame.jobs import ROOT, Job, keeping_solve_checks, solve_fields, train_job
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.ledger import Ledger
from experiments.frame.stats import seed_count
from experiments.frame.train_flags import check_train_flags, refuse_other_train_args, refuse_unusable_paths, split_train_args
from experiments.frame.tables import markdown_table
from experiments.memory_length import DQN_ARGS, DQN_ROLLOUT, FLOOR, MODELS, SOLVED, SWEPT, model_args

LENGTHS = [2**k for k in range(11)]  # 1 .. 1,024
EPISODE_CAP, EPISODE_CAP_UNTIL, FRAME_CAP = 40_000, 256, 12_000_000
BEYOND = 1024  # past it, the cap is BEYOND_SCALE x the median frames to solve L/2
BEYOND_SCALE = 4
FLOOR_UNTIL = 16  # the MLP's longest length
FEWER_FROM = 512  # 5 seeds to L = 256, 3 beyond
CHECK_EPISODES, CHECK_GROWTH = 200, 0.1  # the solve check's least gap (in episodes' frames) and its growth
WITHIN_EPISODES = 10_000  # bsuite's budget: "solved within 10,000 episodes", read at the checks
QUICK_FRAMES = 4_096


def cap_frames(length: int, frames_to_solve_half: list[float] | None = None) -> int:
    """A run's frame cap at `length`: 40,000 episodes of L + 1 steps to 256, 12M from 512, and past
    1,024 four times the median of `frames_to_solve_half` (the model's runs at L/2, censored
    ones as inf); a ValueError where that median is not known."""
    if length <= EPISODE_CAP_UNTIL:
        return EPISODE_CAP * (length + 1)
    if length <= BEYOND:
        return FRAME_CAP
    median = float(np.median(frames_to_solve_half)) if frames_to_solve_half else np.inf
    if not np.isfinite(median):
        raise ValueError(f"L = {length}: its cap is {BEYOND_SCALE}x the median frames to solve L = {length // 2}, which this sweep "
                         f"has not measured for the model (run L = {length // 2} first, or most of its runs there are censored)")
    return int(BEYOND_SCALE * median)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", nargs="+", type=positive_int, action=Distinct, default=LENGTHS)
    parser.add_argument("--models", nargs="+", choices=list(MODELS), action=Distinct, default=SWEPT,
                        help="models to run (default: every core, GTrXL's row transformer-episode-gtrxl among them; the Feedback "
                             "core's option rows on request)")
    parser.add_argument("--seeds", type=seed_count, default=5, help="seeds 0 .. N-1 (default: 5)")
    parser.add_argument("--fewer-seeds", nargs=2, type=positive_int, default=None, metavar=("LENGTH", "N"),
                        help=f"from LENGTH on, seeds 0 .. N-1 only (default: {FEWER_FROM} and 3, or --seeds if fewer)")
    parser.add_argument("--stop-after", type=positive_int, default=2, metavar="N",
                        help="stop a model's sweep after N lengths in a row that no seed solves within its cap (default: 2)")
    parser.add_argument("--eval-episodes", type=positive_int, default=100, help="greedy episodes per solve check (default: 100)")
    parser.add_argument("--estimate-only", action="store_true",
                        help="time an update of each model at each length to 1,024 (the window full), write the expected time of "
                             "every run to its cap to OUT/NAME_estimate.json, and train nothing")
    add_experiment_arguments(parser, None, "output file stem (default: frames_to_solve[_ppo|_dqn])", algo=True, minibatches=True,
                             folder="memory_length", dqn=True)
    parser.add_argument("--train-args", default="", metavar="'FLAGS'",
                        help="more train_a2c.py / train_ppo.py flags for every run, as one quoted string; needs a --name of its own")
    parser.add_argument("--ledger", type=Path, default=None, metavar="PATH", help="the finished runs' records (default: OUT/NAME_runs.json)")
    add_launcher_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    args.command = "python -m experiments.frames_to_solve " + shlex.join(sys.argv[1:] if argv is None else argv)
    minibatches = minibatch_args(parser, args)
    if args.train_args and args.name is None:
        parser.error(f"--train-args {args.train_args!r}: give a --name of its own, or its runs would resume the plain sweep's")
    extra = split_train_args(parser, args.train_args)
    args.fewer_seeds = args.fewer_seeds or (FEWER_FROM, min(3, args.seeds))
    if args.fewer_seeds[1] > args.seeds:
        parser.error(f"--fewer-seeds {args.fewer_seeds[0]} {args.fewer_seeds[1]}: at most --seeds ({args.seeds}) seeds, not more")
    args.name = output_name(args, "frames_to_solve")
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / args.name)
    refuse_unusable_paths(parser, runs_dir, args.ledger)
    sweep = Sweep(args, runs_dir, None, [*minibatches, *extra])
    for model in args.models:  # each model's flags checked before anything is written
        check_train_flags(parser, args.algo, sweep.train_args(model, min(args.lengths), 0))
    refuse_other_train_args(parser, args.out / f"{args.name}.json", args.train_args)
    sweep.ledger = Ledger(args.ledger or args.out / f"{args.name}_runs.json", runs_dir, ("train.done.json", "past_length.done.json"))
    sweep.run()


def task_args(length: int, algo: str = "a2c") -> list[str]:
    """The flags every run at `length` shares: the task without the clock, the CPU preset, no
    previous action and reward among the inputs; the gradient back to the episode's start (A2C,
    PPO), or with DQN the memory-length runner's DQN settings (DQN_ARGS, DQN_ROLLOUT), whose
    replayed whole episodes take the gradient there without a window to set."""
    learner = [*DQN_ARGS, "--rollout", str(DQN_ROLLOUT)] if algo == "dqn" else ["--bptt", "episode"]
    return ["--env", "memory_length", "--env-opt", f"length={length},show_time=false", "--preset", "cpu", *learner, "--no-previous-inputs"]


class Sweep:
    """The runs of one invocation, made length by length (see the module docstring)."""

    def __init__(self, args: argparse.Namespace, runs_dir: Path, ledger: Ledger | None, extra: list[str]):
        self.args, self.runs_dir, self.ledger, self.extra = args, runs_dir, ledger, extra
        self.lengths = sorted(args.lengths)
        self.started = time.time()
        self.cells: dict[tuple[str, int], dict[int, tuple[Job, Job]]] = {}  # (model, L) -> {seed: (training, past_length)}

    def seeds_at(self, length: int) -> list[int]:
        fewer_from, fewer = self.args.fewer_seeds
        return list(range(fewer if length >= fewer_from else self.args.seeds))

    def train_args(self, model: str, length: int, seed: int) -> list[str]:
        """train_ALGO.py's flags of one run, its seed last (the estimate's model key drops it)."""
        a = self.args
        check = ["--solve-at", str(SOLVED), "--eval-every", str(CHECK_EPISODES * (length + 1)), "--eval-growth", str(CHECK_GROWTH),
                 "--eval-episodes", str(2 if a.quick else a.eval_episodes)]
        quick = ["--num-envs", "4", *QUICK_ALGO[a.algo]] if a.quick else []
        return [*task_args(length, a.algo), *check, *model_args(model, "memory_length", length, a.quick), *self.extra, *quick, "--seed", str(seed)]

    def jobs(self, model: str, length: int, frames: int) -> dict[int, tuple[Job, Job]]:
        """{seed: (training, past_length)} of one cell; the training's record keeps RUN/solve.json."""
        jobs = {}
        for seed in self.seeds_at(length):
            run_dir = self.runs_dir / model / f"L{length}" / f"seed{seed}"
            training = keeping_solve_checks(train_job(f"{model} L{length} seed {seed}", run_dir, self.train_args(model, length, seed),
                                                      frames, self.args.algo))
            training.ledger = self.ledger
            command = [sys.executable, "-m", "experiments.past_length", str(run_dir), "--episodes", str(2 if self.args.quick else 100)]
            past = Job(f"past length {run_dir}", lambda command=command: command, run_dir / "past_length.log", run_dir / "past_length.done.json",
                       training.target, ledger=self.ledger)
            training.then = (past,)
            jobs[seed] = (training, past)
        return jobs

    def cap(self, model: str, length: int) -> int:
        if self.args.quick:
            return QUICK_FRAMES
        half = self.cells.get((model, length // 2))
        return cap_frames(length, [run["frames_to_solve"] or np.inf for run in self.per_seed(half)] if half else None)

    def run(self) -> None:
        a = self.args
        print(f"runs kept in {self.ledger.path}: {self.ledger.runs()} finished")
        print(f"the recall task without the clock, {a.algo.upper()}, lengths {self.lengths}, models {a.models}, {where_runs_go(a)}, in {self.runs_dir}")
        if a.estimate_only:
            self.estimate()
            return
        if not (a.quick or a.no_estimate):
            print_expected_time(self.capped_jobs(), a.jobs)
            print("(at most that: every run to its cap; runs stop when solved, and sweeps after unsolved lengths)")
        unsolved: dict[str, int] = {}
        stopped: dict[str, int] = {}
        for length in self.lengths:
            here = [model for model in a.models if model not in stopped and self.keeps(model, length)]
            for model in here:
                self.cells[model, length] = self.jobs(model, length, self.cap(model, length))
            runs = [pair for model in here for pair in self.cells[model, length].values()]
            # A run's past-length job follows its training in the same worker; its own stage catches
            # one whose training had finished before (a stopped sweep, a failed try).
            run_stages({f"L = {length}": [training for training, _ in runs], f"L = {length}, past its length": [past for _, past in runs]}, a)
            for model in here:
                solved = any(run["solved"] for run in self.per_seed(self.cells[model, length]))
                unsolved[model] = 0 if solved else unsolved.get(model, 0) + 1
                if unsolved[model] >= a.stop_after and model != FLOOR:  # the control runs to FLOOR_UNTIL
                    stopped[model] = length
                    print(f"{model}: no seed solved the last {a.stop_after} lengths; its sweep stops at L = {length}")
            self.write(stopped, complete=length == self.lengths[-1])

    def capped_jobs(self) -> list[Job]:
        """The training jobs of every model at every length to 1,024, each to its cap."""
        cells = [(model, length) for length in self.lengths for model in self.args.models if length <= BEYOND and self.keeps(model, length)]
        return [job for model, length in cells for job, _ in self.jobs(model, length, self.cap(model, length)).values()]

    def estimate(self) -> None:
        """--estimate-only: the runner's estimate of every run not yet done, each to its cap, printed and written."""
        write_estimate(self.args.out / f"{self.args.name}_estimate.json", self.capped_jobs(), self.args.jobs, self.args.command,
                       launcher_description(self.args))

    def keeps(self, model: str, length: int) -> bool:
        """Whether `model` runs at `length` at all: the MLP to FLOOR_UNTIL only."""
        return model != FLOOR or length <= FLOOR_UNTIL

    def per_seed(self, cell: dict[int, tuple[Job, Job]]) -> list[dict]:
        """Each finished run of a cell: seed, frames / episodes / seconds to solve or the cap it was
        censored at, solved within 10,000 episodes, its checks, success at other lengths."""
        runs = []
        for seed, (training, past) in cell.items():
            record = training.result()
            if record is None:
                continue
            solve = record["solve"]
            within = any(c.get("confirmation", -1) >= SOLVED and c["episodes"] <= WITHIN_EPISODES for c in solve["checks"])
            tried = json.loads(past.result()["last_line"]) if past.result() else {}
            fields = solve_fields(solve)
            checks = fields.pop("checks")
            runs.append({"seed": seed, **fields, "solved_within_10000_episodes": within, "training_seconds": record.get("training_seconds"),
                         "success_at_length": tried.get("success"), "checks": checks})
        return runs

    def write(self, stopped: dict[str, int], complete: bool) -> None:
        """NAME.json and NAME.md of the cells run so far."""
        a = self.args
        # A call with fewer models (one core run ahead, say) adds to the file: the cells, stops and
        # commands of the models it did not run stay as earlier calls wrote them.
        before = read_record(a.out / f"{a.name}.json") or {"models": {}}
        stopped = {**{model: length for model, length in before.get("stopped", {}).items() if model not in a.models}, **stopped}
        complete = complete and set(before["models"]) <= set(a.models)  # not while a model of the file was left out
        summary = {
            "command": a.command, "commands": every_call(before, a.command), "machine": launcher_description(a),
            "task": "memory_length, show_time=False", "algo": a.algo, "train_args": a.train_args,
            "lengths": sorted({*before.get("lengths", ()), *self.lengths}),
            "seeds": a.seeds, "fewer_seeds": {"from_length": a.fewer_seeds[0], "seeds": a.fewer_seeds[1]}, "solved_at": SOLVED,
            "check": {"episodes": a.eval_episodes, "least_gap_episodes": CHECK_EPISODES, "growth": CHECK_GROWTH, "confirmed": True},
            "cap": {"episodes_until_256": EPISODE_CAP, "frames_from_512": FRAME_CAP, "beyond_1024": f"{BEYOND_SCALE}x the median at L/2"},
            "stop_after": a.stop_after, "stopped": stopped, "complete": complete,
            "wall_seconds_this_invocation": round(time.time() - self.started, 1), "models": {},
        }
        # A resumed sweep reaches its later lengths again only after its earlier ones: until then the
        # cells an earlier invocation wrote stand as they were, so the JSON never shows less than before
        for model, entry in before["models"].items():
            summary["models"][model] = {**entry, "lengths": {length: cell for length, cell in entry["lengths"].items()
                                                             if (model, int(length)) not in self.cells}}
        for (model, length), cell in self.cells.items():
            training = next(iter(cell.values()))[0]
            entry = summary["models"].setdefault(model, {"core": MODELS[model][0], "span": MODELS[model][1], "lengths": {}})
            entry["lengths"][str(length)] = {"cap_frames": int(training.target.split()[0]), "train_args": training.work[1][:-2],
                                             "per_seed": self.per_seed(cell)}
        for entry in summary["models"].values():
            entry["lengths"] = dict(sorted(entry["lengths"].items(), key=lambda item: int(item[0])))
        a.out.mkdir(parents=True, exist_ok=True)
        write_json(a.out / f"{a.name}.json", summary, indent=1)
        write_text(a.out / f"{a.name}.md", table(summary))


def frames_text(run: dict) -> str:
    """"1.2M", or ">12M" for a run censored at its cap."""
    frames = run["frames_to_solve"] if run["solved"] else run["censored_at"]
    text = f"{frames / 1e6:.2f}M" if frames >= 1e5 else f"{frames / 1e3:.1f}k"
    return text if run["solved"] else ">" + text


def table(summary: dict) -> str:
    """A row per model and length: runs solved, each run's frames to solve (>cap: censored), the
    runs solved within 10,000 episodes, and a solved run's success at 2L."""
    rows = []
    for name, model in summary["models"].items():
        for length, cell in model["lengths"].items():
            runs = cell["per_seed"]
            at_2l = [f"{run['success_at_length'][str(2 * int(length))]:.2f}" for run in runs if run["success_at_length"]]
            rows.append([name, length, f"{sum(run['solved'] for run in runs)} / {len(runs)}", ", ".join(frames_text(run) for run in runs),
                         sum(run["solved_within_10000_episodes"] for run in runs), ", ".join(at_2l) or "-", f"{cell['cap_frames']:,}"])
    caption = (f"Frames to solve the recall task (no clock) against L, {summary['algo'].upper()}: each run's frames at the first solve check "
               f"(greedy success >= {summary['solved_at']} on {summary['check']['episodes']} episodes, confirmed on fresh ones); "
               ">N: censored, unsolved at its cap of N frames. Within 10k: runs solved at a check within 10,000 episodes. "
               "At 2L: a solved run's greedy success at twice its length.")
    partial = "" if summary["complete"] else "**The sweep so far**; the same command resumes it.\n\n"
    return partial + markdown_table(["model", "L", "solved", "frames to solve, per seed", "within 10k episodes", "at 2L", "cap"], rows, caption)


if __name__ == "__main__":
    main()
