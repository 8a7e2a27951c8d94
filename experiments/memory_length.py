"""How far back each core remembers: success against memory length, every memory core, A2C, PPO or DQN.

    python -m experiments.memory_length                                # the passive T-maze, A2C, lengths 8 .. 512, 5 seeds
    python -m experiments.memory_length --algo ppo                     # the same with PPO
    python -m experiments.memory_length --algo dqn --models lstm-chrono --lengths 16 32 --seeds 3   # DQN (train_dqn.py)
    python -m experiments.memory_length --env corridor                 # the paper's corridor (random doors: an XOR too)
    python -m experiments.memory_length --env memory_length --budget bsuite   # bsuite's memory_len: recall alone, nothing to explore

Three tasks. The passive T-maze of Ni et al. (NeurIPS 2023, "When Do Transformers Shine in RL?
Decoupling Memory from Credit Assignment"; envs/tmaze.py): the goal side is shown at the first
step only, the episode is exactly L + 1 steps, every step not taken forward costs 1 / L, the right
side at the end gives +1; a memory of L steps and nothing else. The paper's corridor
(envs/corridor.py): the cue at the first cell, two doors at the far end whose up/down order is
random per episode (`--doors random`, the default: the right door is XOR(cue, upper door's
colour)) or fixed (`--doors fixed`: the cue alone says which), a time limit of 4 L steps. And
bsuite's memory_len (envs/memory_length.py, `--env memory_length`): one bit shown at the first
step, asked for at the last of exactly L + 1 steps, the actions before it doing nothing, so that
recall is measured with no exploring to do (the T-maze's agents must first learn to walk and to
turn).

Each (model, length, seed) is a train_a2c.py (or train_ppo.py) run of the CPU preset on the
observation only (`--no-previous-inputs`: memory is the only way to carry the cue) with a
gradient window that follows the episode (`--bptt episode`: every step's gradient reaches back
to its episode's first step whatever the rollout's phase, agents/learners/window.py), so that the step that
must store the cue and the step rewarded for it are always in one backward pass. With `--algo dqn`
a run is train_dqn.py's instead (Ni et al.'s learner: whole episodes replayed, so the gradient
reaches every episode's first step without --bptt) with DQN_ARGS, the settings that solved the
T-maze at L = 16 (docs/training.md, DQN): 16 envs, 16-step rollouts, learning from frame 5,000. (Sweeps before
2026-11-27 used `--bptt max(rollout, L + 1)`, which with 32-step rollouts held both only for
episodes that began early enough in their rollout: their JSON says "bptt" is missing.) Then
greedy and sampled evaluation (DQN: epsilon-greedy at its last epsilon), and on the T-maze each run's reading by
experiments/tmaze_policy.py (walks, reaches the junction, turns, turns the right way), so that a
failure to explore and a failure to remember are counted run by run. Models: the Feedback
Transformer at span 1 (the paper's "all memory sizes") and span 16 (its memory hops up to 16 steps
at a time); the Transformer at span 16 (reach 32: the control that must fail beyond it) and at a
span covering the episode; LSTM and GRU with PyTorch's initialisation and with chrono
initialisation (`gate_init=chrono`, T_max twice the episode: agents/cores/recurrent.py); the
linear recurrences FFM and LRU (agents/cores/ffm.py, lru.py) and Mamba's selective state space
(agents/cores/mamba.py) at their defaults; the MLP (no memory) at the shortest length only, as
the floor; on request (`--models`), the Feedback
core at span 16 with one of its options, `read_norm=False` or `value_init=orthogonal`
(feedback-span16-no-read-norm, feedback-span16-orthogonal), and GTrXL, the Transformer at the
episode's span with `gating=gru` (transformer-episode-gtrxl). A run solves a length when its greedy
success is >= 0.95; a core "reaches" the longest length that most of its seeds solve, and scores
the share of its lengths that most of its seeds solve (bsuite's kind of score).

Frames per length follow Ni et al.'s budget for their DQN (experiments/memory_length.py:
ni_frames: 1e6 env steps up to length 50, 2e6 at 100, 4e6 at 250 and 500, 6e6 at 750, 8e6 at
1,000, 1e7 beyond), or `--budget bsuite`: bsuite's memory_len budget of 10,000 episodes a run
up to L = 128, then 10,000 episodes or 3M frames, whichever is fewer (bsuite_frames; the
T-maze's episodes are exactly L + 1 steps, so episodes are frames); either times `--frame-scale`
(default 1; a 2-core CPU takes a small fraction of Ni et al.'s and says which; 4 at a cliff asks
whether more training moves it). Or `--frames` for every length. `--seeds` N runs seeds 0 .. N-1,
and `--fewer-seeds LENGTH M` only the first M from LENGTH on, where runs cost the most.

A run trained with a solve criterion (`--train-args '--solve-at 0.99 --eval-every N'`: the
trainer checks its greedy policy every N frames and stops once solved, agents/learners/solve.py)
keeps its checks in its training record, and its per-seed entry has them ("solve": the frames to
solve or the cap it was censored at, and every check's score).

Writes NAME.json (raw per-seed numbers, commands, machine, wall time), NAME.md and NAME.png
(success against length, log axis, one line per model, Ni et al.'s transformer result marked),
and NAME_runs.json as it goes: every finished run's records (experiments/frame/ledger.py: its
training, its evaluations, on the T-maze its reading), each run evaluated and read as soon as it
is trained, so that a sweep stopped here resumes on another machine from the committed file,
without the run folders.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

from agents.config.a2c_config import preset_values
from agents.plot_curves import save_figure
from durable.records import write_json, write_text
from envs.cli import non_negative_float, non_negative_int, positive_float, positive_int
from experiments.frame.flags import KEEPING_OPTIONS, Distinct, QUICK_ALGO, QUICK_CORE, add_experiment_arguments, minibatch_args, output_name, run_frames, runs_folder
from experiments.frame.estimate import print_expected_time, write_estimate
from experiments.frame.jobs import ROOT, Job, evaluate_job, evaluation, keeping_solve_checks, run_seconds, solve_fields, train_job
from experiments.frame.ledger import Ledger
from experiments.frame.train_flags import check_train_flags, refuse_other_train_args, refuse_unusable_paths, split_train_args
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.stats import iqm_interval, seed_count, solved_interval
from experiments.frame.tables import format_interval, format_solved, markdown_table, minutes_per_run

# --env: the task's name on the page and in the figure
TASKS = {"tmaze": "passive T-maze", "corridor": "corridor ({doors} doors)", "memory_length": "memory length task (bsuite's memory_len, one bit)"}
SOLVED = 0.95  # greedy success at which a run counts as having solved a length
LAYERS = 2
# name -> (core, span: an int, "episode" (the episode's length) or None for the cores without one)
MODELS = {
    "feedback-span1": ("feedback", 1),
    "feedback-span16": ("feedback", 16),
    "transformer-span16": ("transformer", 16),
    "transformer-episode": ("transformer", "episode"),
    "lstm": ("lstm", None),
    "lstm-chrono": ("lstm", None),
    "gru": ("gru", None),
    "gru-chrono": ("gru", None),
    "ffm": ("ffm", None),
    "lru": ("lru", None),
    "mamba": ("mamba", None),
    "mlp": ("mlp", None),
    "feedback-span16-no-read-norm": ("feedback", 16),
    "feedback-span16-orthogonal": ("feedback", 16),
    "transformer-episode-gtrxl": ("transformer", "episode"),
    "feedback-span16-carry": ("feedback", 16),
    "feedback-span16-kept": ("feedback", 16),
    "feedback-span16-tanh": ("feedback", 16),
}
# Rows of a core with one of its options, on request (--models): not in the default sweep. The
# Feedback core's (docs/experiments/corridor-span.md's remedies for its fading memory, and the
# ways of keeping the cue of reference.py), run where its default fails; GTrXL, the Transformer with GRU-type gates in place of its residual sums
# (docs/cores.md), at the span covering the episode.
OPTIONS = {"feedback-span16-no-read-norm": "read_norm=False", "feedback-span16-orthogonal": "value_init=orthogonal",
           "transformer-episode-gtrxl": "gating=gru", **{f"feedback-span16-{name}": keep for name, keep in KEEPING_OPTIONS.items()}}
# The frames-to-solve sweep's default models: every core, GTrXL among them (a core of its own on
# the cores page), the Feedback core's options on request only
SWEPT = [name for name in MODELS if name not in OPTIONS or OPTIONS[name] == "gating=gru"]
# The Feedback memory's ways of keeping the cue (agents/cores/feedback/reference.py), their gates'
# chrono T_max twice the episode's length as the recurrent cores' (CHRONO)
KEEPING = ("feedback-span16-carry", "feedback-span16-kept")
CHRONO = ("lstm-chrono", "gru-chrono")  # gate_init=chrono with T_max twice the episode's length
# --algo dqn: train_dqn.py's settings that solved the T-maze at L = 16 in 3 of 3 seeds
# (docs/training.md, DQN), with --rollout 16 (DQN_ROLLOUT) unless --rollout is given
DQN_ARGS = ["--num-envs", "16", "--learning-starts", "5000"]
DQN_ROLLOUT = 16
PYTORCH = ("lstm", "gru")  # gate_init=pytorch: torch's biases (the LSTM's default before 2026-11-27, the GRU's still)
FLOOR = "mlp"  # run at the shortest length only
# What evaluation reports per run: success (the right side / door), and on the T-maze whether the
# agent got to either side in time at all (envs/tmaze.py: a failure to walk, not to remember).
ARRIVAL_KEYS = ("success", "arrived")
# Ni et al.'s budget.py for the passive T-maze: (longest length, env steps) in order.
NI_BUDGET = ((50, 1_000_000), (100, 2_000_000), (500, 4_000_000), (750, 6_000_000), (1000, 8_000_000), (None, 10_000_000))
NI_TRANSFORMER_SOLVES = 1500  # their transformer (GPT-2 over the whole episode, DQN) solves the passive T-maze up to here


def ni_frames(length: int) -> int:
    """Ni et al.'s env steps for a passive T-maze of `length` (their lengths start at 50; shorter
    ones get the 50's budget)."""
    return next(steps for longest, steps in NI_BUDGET if longest is None or length <= longest)


BSUITE_EPISODES, BSUITE_FULL_UNTIL, BSUITE_FRAME_CAP = 10_000, 128, 3_000_000


def bsuite_frames(length: int) -> int:
    """The T-maze's frames for bsuite's budget: 10,000 episodes of L + 1 steps up to L = 128, then
    at most 3M frames (issue 50's budget, the same for every core)."""
    frames = BSUITE_EPISODES * episode_steps("tmaze", length)  # memory_length's episodes are as long
    return frames if length <= BSUITE_FULL_UNTIL else min(frames, BSUITE_FRAME_CAP)


def episode_steps(env: str, length: int) -> int:
    """The longest episode at this length: L + 1 on the T-maze and memory_length, the corridor's 4 L time limit."""
    return 4 * length if env == "corridor" else length + 1


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", choices=list(TASKS), default="tmaze")
    parser.add_argument("--doors", choices=["random", "fixed"], default="random", help="with --env corridor: the doors' order (default: random, the paper's)")
    parser.add_argument("--env-opt", action="append", default=[], metavar="KEY=VALUE",
                        help="more env options for every run (repeatable; the T-maze's controls: penalty=action, expose_goal=true); "
                             "needs a --name of its own, since its runs are not the plain ones")
    parser.add_argument("--lengths", nargs="+", type=positive_int, action=Distinct, default=[8, 16, 32, 64, 128, 256, 512])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), action=Distinct, default=[name for name in MODELS if name not in OPTIONS],
                        help="models to run (default: all but the options' rows, " + ", ".join(OPTIONS) + ")")
    parser.add_argument("--seeds", type=seed_count, default=5, help="seeds 0 .. N-1 (default: 5)")
    parser.add_argument("--fewer-seeds", nargs=2, type=positive_int, default=None, metavar=("LENGTH", "N"),
                        help="from LENGTH on, seeds 0 .. N-1 only: long lengths cost the most (issue 50's sweep: 3 from L = 128)")
    parser.add_argument("--frame-scale", type=positive_float, default=1.0, help="times the budget's frames per length (default: 1)")
    parser.add_argument("--frames", type=positive_int, default=None, help="env frames per run at every length (instead of Ni et al.'s schedule)")
    parser.add_argument("--budget", choices=["ni", "bsuite"], default="ni",
                        help="frames per length, times --frame-scale: ni (Ni et al.'s schedule, the default) or bsuite (10,000 episodes "
                             "a run up to L = 128, then at most 3M frames; tmaze and memory_length, whose episodes are L + 1 steps)")
    parser.add_argument("--rollout", type=positive_int, default=None,
                        help=f"steps per update (default: the CPU preset's, 32; with --algo dqn, {DQN_ROLLOUT})")
    parser.add_argument("--entropy-coef", type=non_negative_float, default=None, help="entropy cost, A2C and PPO (default: the preset's)")
    parser.add_argument("--eval-episodes", type=positive_int, default=100, help="evaluation episodes per run, greedy and sampled (DQN: epsilon-greedy) each (default: 100)")
    parser.add_argument("--estimate-only", action="store_true",
                        help="time an update of each model at each length, write the expected time of every run to its budget "
                             "to OUT/NAME_estimate.json, and train nothing")
    parser.add_argument("--stop-after", type=non_negative_int, default=0, metavar="N",
                        help="run the lengths in turn and stop a model's sweep after N lengths in a row that no seed solves "
                             "(issue 50's rule: 2; the MLP is exempt); 0: every length (default)")
    parser.add_argument("--floor-every-length", action="store_true", help="run the MLP (no memory) at every length, the chance line, "
                                                                          "not only the shortest")
    add_experiment_arguments(parser, None, "output file stem (default: memory_length_ENV[_fixed][_ppo|_dqn])", algo=True, minibatches=True,
                             folder="memory_length", dqn=True)
    parser.add_argument("--train-args", default="", metavar="'FLAGS'",
                        help="more train_a2c.py / train_ppo.py / train_dqn.py flags for every run, as one quoted string (e.g. '--learning-rate 3e-4'); "
                             "give a --name of its own so that such runs do not resume the plain ones")
    parser.add_argument("--ledger", type=Path, default=None, metavar="PATH",
                        help="where the finished runs' records are kept, to resume on another machine (default: OUT/NAME_runs.json)")
    add_launcher_arguments(parser)
    return parser


def env_options_checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """--env-opt as a dict, checked by building the env once (only it knows its options); exit 2
    on a bad one, or when given without a --name (the runs would resume the plain sweep's)."""
    import gymnasium

    from agents.config.config_cli import parse_env_options
    from envs import env_id

    if not args.env_opt:
        return {}
    if args.name is None:
        parser.error(f"--env-opt {' '.join(args.env_opt)}: give a --name of its own, or its runs would resume the plain sweep's")
    try:
        options = parse_env_options(args.env_opt)
        if "length" in options:
            raise ValueError("length is the sweep's (--lengths)")
        gymnasium.make(env_id(args.env), length=min(args.lengths), **options).close()
    except (TypeError, ValueError) as error:
        parser.error(f"--env-opt {' '.join(args.env_opt)}: {error}")
    return options


def frames_at(args: argparse.Namespace, length: int) -> int:
    budget = bsuite_frames(length) if args.budget == "bsuite" else ni_frames(length)
    return run_frames(args, max(1, round(budget * args.frame_scale)))


def model_args(name: str, env: str, length: int, quick: bool) -> list[str]:
    """train_a2c.py's --core arguments of model `name` at this length."""
    core, span = MODELS[name]
    options = [] if span is None else [f"span={episode_steps(env, length) if span == 'episode' else span}", f"n_layers={LAYERS}"]
    if name in CHRONO:
        options += ["gate_init=chrono", f"t_max={2 * episode_steps(env, length)}"]
    if name in KEEPING:
        options.append(f"keep_t_max={2 * episode_steps(env, length)}")
    if name in PYTORCH:
        options.append("gate_init=pytorch")
    if name in OPTIONS:
        options.append(OPTIONS[name])
    if quick:
        options.append(QUICK_CORE[core])
    return ["--core", core, *(["--core-opt", ",".join(options)] if options else [])]


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.doors != "random" and args.env != "corridor":
        parser.error(f"--doors {args.doors} is a corridor option; it needs --env corridor (got --env {args.env})")
    minibatches = minibatch_args(parser, args)
    if args.algo == "dqn" and args.entropy_coef is not None:
        parser.error(f"--entropy-coef {args.entropy_coef} is an A2C and PPO setting; train_dqn.py acts epsilon-greedily (give its "
                     "--epsilon-* flags in --train-args)")
    if args.frames is not None and (args.frame_scale != 1.0 or args.budget != "ni"):
        parser.error("give --frames alone, or a --budget (times --frame-scale)")
    if args.budget == "bsuite" and args.env == "corridor":
        parser.error("--budget bsuite counts episodes of L + 1 steps, the T-maze's and memory_length's; the corridor's episodes vary (use --frames or --frame-scale)")
    env_options = env_options_checked(parser, args)
    args.name = output_name(args, "_".join(["memory_length", "recall" if args.env == "memory_length" else args.env, *(["fixed"] if args.doors == "fixed" else [])]))
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / args.name)
    extra_args = split_train_args(parser, args.train_args)
    refuse_unusable_paths(parser, runs_dir, args.ledger)
    rollout = args.rollout or (DQN_ROLLOUT if args.algo == "dqn" else preset_values(args.env, "feedback", "cpu")[0]["rollout"])
    seeds = list(range(args.seeds))
    if args.fewer_seeds and args.fewer_seeds[1] > args.seeds:
        parser.error(f"--fewer-seeds {args.fewer_seeds[0]} {args.fewer_seeds[1]}: at most --seeds ({args.seeds}) seeds, not more")

    def seeds_at(length: int) -> list[int]:
        fewer = args.fewer_seeds and length >= args.fewer_seeds[0]
        return seeds[: args.fewer_seeds[1]] if fewer else seeds

    lengths = sorted(args.lengths)
    cells = [(model, length) for length in lengths for model in args.models if model != FLOOR or args.floor_every_length or length == lengths[0]]
    runs = [(cell, seed) for seed in seeds for cell in cells if seed in seeds_at(cell[1])]
    run_dir = {(cell, seed): runs_dir / cell[0] / f"L{cell[1]}" / f"seed{seed}" for cell, seed in runs}

    def train_args(model: str, length: int, seed: int) -> list[str]:
        options = ",".join([f"length={length}", *([f"max_episode_steps={4 * length}", f"doors={args.doors}"] if args.env == "corridor" else []),
                            *(f"{key}={value}" for key, value in env_options.items())])
        extra = ["--entropy-coef", str(args.entropy_coef)] if args.entropy_coef is not None else []
        quick = ["--num-envs", "4", *([] if minibatches else QUICK_ALGO[args.algo])] if args.quick else []
        learner = DQN_ARGS if args.algo == "dqn" else ["--bptt", "episode"]  # DQN replays whole episodes: no gradient window to set
        return ["--env", args.env, "--env-opt", options, "--preset", "cpu", "--rollout", str(rollout), *learner,
                "--no-previous-inputs", *extra, *minibatches, *model_args(model, args.env, length, args.quick), *extra_args, "--seed", str(seed), *quick]

    for model in args.models:  # each model's flags checked before anything is written
        check_train_flags(parser, args.algo, train_args(model, lengths[0], 0))
    refuse_other_train_args(parser, args.out / f"{args.name}.json", args.train_args)

    training = {((model, length), seed): keeping_solve_checks(train_job(f"{model} L{length} seed {seed}", run_dir[(model, length), seed],
                                                                        train_args(model, length, seed), frames_at(args, length), args.algo))
                for (model, length), seed in runs}
    episodes = 2 if args.quick else args.eval_episodes
    greedy = {run: evaluate_job(run_dir[run], episodes, frames_at(args, run[0][1]), greedy=True) for run in runs}
    acts = "epsilon-greedy" if args.algo == "dqn" else ""  # not greedy, evaluate.py acts as a DQN run trained
    sampled = {run: evaluate_job(run_dir[run], episodes, frames_at(args, run[0][1]), tag="sampled", acts=acts) for run in runs}
    read = {run: reading_job(run_dir[run], frames_at(args, run[0][1])) for run in runs} if args.env == "tmaze" else {}
    after = {run: (greedy[run], sampled[run], *([read[run]] if read else [])) for run in runs}
    ledger = Ledger(args.ledger or args.out / f"{args.name}_runs.json", runs_dir, tuple(job.record.name for job in (training[runs[0]], *after[runs[0]])))
    for run in runs:
        training[run].then = after[run]
        for job in (training[run], *after[run]):
            job.ledger = ledger
    print(f"runs kept in {ledger.path}: {ledger.runs()} finished")
    print(f"{len(runs)} runs ({len(cells)} model x length cells, {seeds_text(len(seeds), args.fewer_seeds)}) on the {args.env}, {where_runs_go(args)}, in {runs_dir}")
    print("frames per length: " + ", ".join(f"{length}: {frames_at(args, length):,}" for length in lengths))
    if args.estimate_only:
        write_estimate(args.out / f"{args.name}_estimate.json", list(training.values()), args.jobs,
                       "python -m experiments.memory_length " + shlex.join(sys.argv[1:]), launcher_description(args))
        return
    if not (args.quick or args.no_estimate):
        print_expected_time(list(training.values()), args.jobs)
        if args.stop_after:
            print(f"(every length of every model: at most that, with the sweep stopping after {args.stop_after} unsolved lengths)")
    started = time.time()

    def write_results(cells: list, stopped: dict[str, int], complete: bool) -> dict:
        """NAME.json, .md and .png of the cells run so far; `complete`: every length is done."""
        summary = {
            "command": "python -m experiments.memory_length " + shlex.join(sys.argv[1:]), "machine": launcher_description(args),
            "env": args.env, "doors": args.doors if args.env == "corridor" else None, "env_options": env_options, "algo": args.algo,
            "num_minibatches": args.num_minibatches, "train_args": args.train_args, "rollout": rollout,
            "bptt": None if args.algo == "dqn" else "episode", "replay": "episodes" if args.algo == "dqn" else None,
            "lengths": lengths, "frames": {str(length): frames_at(args, length) for length in lengths}, "seeds": seeds,
            "fewer_seeds": {"from_length": args.fewer_seeds[0], "seeds": args.fewer_seeds[1]} if args.fewer_seeds else None,
            "frame_scale": None if args.frames else args.frame_scale, "budget": None if args.frames else args.budget,
            "solved_at": SOLVED,
            "eval": f"{episodes} greedy and {episodes} " + ("epsilon-greedy (at the run's last epsilon)" if args.algo == "dqn" else "sampled")
                    + " episodes per run",
            "stop_after": args.stop_after, "stopped": stopped, "floor_every_length": args.floor_every_length,
            "complete": complete, "lengths_done": sorted({length for _, length in cells}),
            "wall_seconds_this_invocation": round(time.time() - started, 1), "models": {},
        }
        for model, length in cells:
            per_seed = []
            for seed in seeds_at(length):
                run = ((model, length), seed)
                agent = {"greedy": evaluation(greedy[run])["agent"], "sampled": evaluation(sampled[run])["agent"]}
                solve = training[run].result().get("solve")  # where its training took a solve criterion (--train-args '--solve-at ...')
                per_seed.append({"seed": seed, **{f"{how}_{key}": agent[how][key] for how in agent for key in ARRIVAL_KEYS if key in agent[how]},
                                 **({"reading": run_reading(read[run])} if read else {}),
                                 "training_seconds": run_seconds(training[run]), **({"solve": solve_fields(solve)} if solve else {})})
            greedy_success = np.array([run["greedy_success"] for run in per_seed])
            sampled_success = np.array([run["sampled_success"] for run in per_seed])
            stats = iqm_interval({"greedy": greedy_success, "sampled": sampled_success,
                                  **{key: np.array([run[key] for run in per_seed]) for key in ("greedy_arrived", "sampled_arrived") if key in per_seed[0]}})
            summary["models"].setdefault(model, {"core": MODELS[model][0], "span": MODELS[model][1], "lengths": {}})
            summary["models"][model]["lengths"][str(length)] = {
                "train_args": train_args(model, length, 0)[:-2] if not args.quick else None,
                "per_seed": per_seed, **stats,
                "solved": solved_interval(greedy_success, SOLVED),
                **({"failures": failures(per_seed)} if args.env == "tmaze" else {}),
            }
        for name, model in summary["models"].items():
            model["reaches"] = reach(model)
            model["score"] = score(model, 1 if name == FLOOR and not args.floor_every_length else len(lengths))
        args.out.mkdir(parents=True, exist_ok=True)
        write_json(args.out / f"{args.name}.json", summary, indent=1)
        write_text(args.out / f"{args.name}.md", table(summary))
        draw(summary, args.out / f"{args.name}.png")
        return summary

    if args.stop_after:
        print(table(run_lengths_in_turn(cells, seeds_at, training, greedy, args, write_results)))
    else:
        run_stages({"training": list(training.values()), "evaluation": [job for train in training.values() for job in train.then]}, args)
        print(table(write_results(cells, {}, complete=True)))


def reading_job(run_dir: Path, frames: int) -> Job:
    """`python -m experiments.tmaze_policy RUN_DIR` on a trained T-maze run: its reading is the
    JSON line the command prints last."""
    command = [sys.executable, "-m", "experiments.tmaze_policy", str(run_dir)]
    return Job(f"reading {run_dir}", lambda: command, run_dir / "reading.log", run_dir / "reading.done.json", f"{frames} frames")


def run_reading(job: Job) -> dict[str, bool]:
    """The four booleans of a finished reading_job (experiments/tmaze_policy.py)."""
    reading = json.loads(job.result()["last_line"])
    return {key: value for key, value in reading.items() if key != "run"}


def failures(per_seed: list[dict]) -> dict[str, int]:
    """How the cell's unsolved runs failed, counted from their readings (experiments/tmaze_policy.py):
    did not walk the corridor; walked but did not reach the junction in time; reached it but did
    not turn (exploration, all three); turned, but not the right way for both sides (memory);
    did all four on the probes' two episodes yet failed evaluation's (other)."""
    counts = {"runs_unsolved": 0, "no_walk": 0, "no_junction": 0, "no_turn": 0, "wrong_way": 0, "other": 0}
    for run in per_seed:
        if run["greedy_success"] >= SOLVED:
            continue
        r = run["reading"]
        counts["runs_unsolved"] += 1
        why = ("no_walk" if not r["walks"] else "no_junction" if not r["reaches_junction"] else "no_turn" if not r["turns"]
               else "wrong_way" if not r["turns_right_way"] else "other")
        counts[why] += 1
    return counts


def solved_by_most(cell: dict) -> bool:
    """Whether most of a cell's seeds solved its length."""
    return 2 * cell["solved"]["solved"] > cell["solved"]["runs"]


def reach(model: dict) -> int | None:
    """The longest length solved by most of the model's seeds, with every shorter length run also
    solved by most (None: not even the shortest)."""
    longest = None
    for length, cell in sorted(model["lengths"].items(), key=lambda item: int(item[0])):
        if not solved_by_most(cell):
            break
        longest = int(length)
    return longest


def score(model: dict, lengths: int) -> float:
    """bsuite's kind of score: the share of the sweep's `lengths` lengths that most of the model's
    seeds solve (a length the stop rule left out counts as not solved)."""
    return sum(solved_by_most(cell) for cell in model["lengths"].values()) / lengths


def run_lengths_in_turn(cells: list, seeds_at: Callable[[int], list[int]], training: dict, greedy: dict,
                        args: argparse.Namespace, write_results: Callable[[list, dict[str, int], bool], dict]) -> dict:
    """Train and evaluate one length at a time, shortest first, and stop a model's sweep once
    `args.stop_after` lengths in a row have no seed solving them (the MLP, the chance line, is
    never stopped). After each length, `write_results(cells run, {model: the length after which
    it stopped}, complete)`: the results so far are on disk while the longer lengths train.
    Returns the last summary it wrote."""
    run, stopped, unsolved = [], {}, {}
    lengths = sorted({length for _, length in cells})
    for length in lengths:
        here = [cell for cell in cells if cell[1] == length and cell[0] not in stopped]
        seeds = seeds_at(length)
        keys = [(cell, seed) for seed in seeds for cell in here]
        run_stages({f"training, L = {length}": [training[key] for key in keys],
                    f"evaluation, L = {length}": [job for key in keys for job in training[key].then]}, args)
        run += here
        for model, _ in here:
            solved = any(evaluation(greedy[(model, length), seed])["agent"]["success"] >= SOLVED for seed in seeds)
            unsolved[model] = 0 if solved else unsolved.get(model, 0) + 1
            if model != FLOOR and unsolved[model] >= args.stop_after:
                stopped[model] = length
                print(f"{model}: no seed solved the last {args.stop_after} lengths; its sweep stops at L = {length}")
        summary = write_results(run, dict(stopped), length == lengths[-1])
    return summary


def fewer_seeds(summary: dict) -> tuple[int, int] | None:
    """(LENGTH, N) of the sweep's --fewer-seeds, or None (sweeps before it have no such key)."""
    fewer = summary.get("fewer_seeds")
    return (fewer["from_length"], fewer["seeds"]) if fewer else None


def seeds_text(seeds: int, fewer: tuple[int, int] | None) -> str:
    """"5 seeds", or "5 seeds (3 from L = 256)"."""
    return f"{seeds} seeds" + (f" ({fewer[1]} from L = {fewer[0]})" if fewer else "")


def table(summary: dict) -> str:
    """The solved matrix, then a row per model and length; the arrived column where the env
    reports arriving (T-maze, corridor), the failures' column on the T-maze (its readings)."""
    task = "the " + TASKS[summary["env"]].format(doors=summary["doors"])
    window = ("following each episode (--bptt episode)" if summary.get("bptt") == "episode" else
              "over whole episodes replayed (train_dqn.py)" if summary.get("replay") == "episodes" else "of max(rollout, L + 1) steps")
    cells = [(name, length, cell) for name, model in summary["models"].items() for length, cell in model["lengths"].items()]
    arrives, read = any("greedy_arrived" in cell for *_, cell in cells), summary["env"] == "tmaze"
    checked = any("solve" in run for *_, cell in cells for run in cell["per_seed"])
    caption = (f"Success on {task} against its length L, {summary['algo'].upper()}, rollouts of {summary['rollout']} steps and a "
               f"gradient window {window}, the observation only"
               + (f"; then --train-args '{summary['train_args']}', whose flags win" if summary.get("train_args") else "")
               + "; frames per length: "
               + ", ".join(f"{length}: {frames:,}" for length, frames in summary["frames"].items())
               + f". IQM over {seeds_text(len(summary['seeds']), fewer_seeds(summary))} [95% bootstrap CI]"
               + ("; arrived: on either side at the end, so success / arrived is memory and arrived is walking" if arrives else "")
               + ("; sampled: epsilon-greedy as the run acted at its last frame (Ni et al.'s schedule: 1 / (L + 1) past the first 10% of the cap)"
                  if summary["algo"] == "dqn" else "")
               + f"; solved: greedy success >= {summary['solved_at']} (runs, probability [Wilson 95% CI])"
               + ("; unsolved runs by their reading: did not walk / did not reach the junction / did not turn / turned the wrong way / other"
                  if read else "")
               + ("; frames to solve: the first of the run's solve checks whose score and confirmation reached its --solve-at "
                  "(training stopped there), or the cap it reached without (censored)" if checked else "") + ".")
    columns = ["model", "L", "greedy success", "sampled success", *(["arrived (greedy, sampled)"] if arrives else []), "solved",
               *(["unsolved: walk / junction / turn / wrong way / other"] if read else []), "greedy per seed",
               *(["frames to solve per seed"] if checked else []), "training time per run"]
    rows = []
    for name, length, cell in cells:
        per_seed = ", ".join(f"{run['greedy_success']:.2f}" for run in cell["per_seed"])
        arrived = [f"{cell['greedy_arrived']['iqm']:.2f}, {cell['sampled_arrived']['iqm']:.2f}" if "greedy_arrived" in cell else "-"] if arrives else []
        failed = cell.get("failures")
        why = [" / ".join(str(failed[key]) for key in ("no_walk", "no_junction", "no_turn", "wrong_way", "other")) if failed else "-"] if read else []
        frames = [", ".join(frames_to_solve_text(run.get("solve")) for run in cell["per_seed"])] if checked else []
        rows.append([name, length, format_interval(cell["greedy"]), format_interval(cell["sampled"]), *arrived, format_solved(cell["solved"]),
                     *why, per_seed, *frames, minutes_per_run(run["training_seconds"] for run in cell["per_seed"])])
    partial = "" if summary.get("complete", True) else (
        "**The sweep so far**: lengths " + ", ".join(map(str, summary["lengths_done"])) + " of " + ", ".join(map(str, summary["lengths"]))
        + " are done; the same command resumes it.\n\n")
    return partial + solved_matrix(summary) + "\n" + markdown_table(columns, rows, caption)


def frames_to_solve_text(solve: dict | None) -> str:
    """A run's frames to solve from its solve checks ("60,672"), "censored at N" where it reached
    its cap unsolved, "-" where it took no criterion or stopped before either."""
    if solve is None:
        return "-"
    if solve["frames_to_solve"] is not None:
        return f"{solve['frames_to_solve']:,}"
    return f"censored at {solve['censored_at']:,}" if solve["censored_at"] is not None else "-"


def solved_matrix(summary: dict) -> str:
    """The curve at a glance, before the full table: runs solved per model and length, then each
    model's reach and score."""
    lengths = [str(length) for length in summary["lengths"]]
    rows = [[name, *(model["lengths"][length]["solved"]["solved"] if length in model["lengths"] else "-" for length in lengths),
             model["reaches"] or "none", f"{model['score']:.2f}"] for name, model in summary["models"].items()]
    caption = (f"Runs that solved each length L, of {seeds_text(len(summary['seeds']), fewer_seeds(summary))} (greedy success >= {summary['solved_at']}; -: not run"
               + (f", the sweep of a model stopping after {summary['stop_after']} lengths in a row that no seed solved" if summary.get("stop_after") else "")
               + "). Reaches: the longest length solved by most seeds, and every shorter one too; score: the share of the "
               f"{len(lengths)} lengths solved by most seeds (bsuite's kind of score).")
    return markdown_table(["model", *(f"L {length}" for length in lengths), "reaches", "score"], rows, caption)
def draw(summary: dict, out: Path) -> None:
    """Greedy success (IQM, 95% intervals) against length on a log axis, one line per model; the
    floor (MLP) as a point at the shortest length; Ni et al.'s transformer result (the passive
    T-maze, L = 1,500) marked beside the T-maze and the recall task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7.0, 4.2), dpi=100)
    names = list(summary["models"])
    for offset, name in zip(np.linspace(-0.08, 0.08, len(names)), names):
        cells = sorted(summary["models"][name]["lengths"].items(), key=lambda item: int(item[0]))
        x = np.array([int(length) for length, _ in cells], dtype=float) * 2**offset  # side by side
        iqm = np.array([cell["greedy"]["iqm"] for _, cell in cells])
        low, high = np.array([cell["greedy"]["ci_low"] for _, cell in cells]), np.array([cell["greedy"]["ci_high"] for _, cell in cells])
        axes.errorbar(x, iqm, yerr=[iqm - low, high - iqm], marker="o", capsize=3, linewidth=1.6, label=name)
    ni_marked = summary["env"] != "corridor"  # their memory task is the passive T-maze; the recall task asks its question without exploring
    if ni_marked:
        where = "" if summary["env"] == "tmaze" else " the passive T-maze to"
        axes.plot([NI_TRANSFORMER_SOLVES], [1.0], marker="*", markersize=12, color="black", linestyle="none",
                  label=f"Ni et al.: transformer, DQN, solves{where} {NI_TRANSFORMER_SOLVES:,}")
    axes.axhline(0.5, color="#999999", linestyle=":", linewidth=1)
    axes.set_xscale("log", base=2)
    ticks = [*summary["lengths"], *([NI_TRANSFORMER_SOLVES] if ni_marked else [])]
    axes.set_xticks(ticks, [str(t) for t in ticks])
    axes.minorticks_off()
    axes.set_xlabel("memory length L (steps between the cue and the decision)")
    axes.set_ylabel("greedy success rate")
    axes.set_ylim(-0.02, 1.05)
    task = TASKS[summary["env"]].format(doors=summary["doors"])
    axes.set_title(f"{task}, {summary['algo'].upper()}, {seeds_text(len(summary['seeds']), fewer_seeds(summary))}", loc="left", fontsize=11)
    save_figure(figure, axes, out, fontsize=7, loc="lower left")


if __name__ == "__main__":
    main()
