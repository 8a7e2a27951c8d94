"""Settings searched, not guessed: an Optuna study per core at the same budget, then the best
settings trained again on fresh seeds beside the preset's.

    python -m experiments.tune --env tmaze --env-opt length=16 --algo ppo --cores lstm gru feedback:span=16 \\
        transformer:span=16 --train-args "--bptt episode --no-previous-inputs" --trials 30 --frames 200000 --seeds 2
    python -m experiments.tune --env corridor --cores feedback:span=2 transformer:span=2 --frames 1500000 --launcher slurm

Each core (`--cores CORE[:KEY=VALUE,...]`, several in one call) gets its own study, all with the
same trials, frames, seeds and space; the command says so, and a study reopened with another
budget is refused. A trial samples every setting of the learner's space (declared beside its
config: A2CConfig.search_space, PPOConfig.search_space; narrowed or fixed with `--space`; a
setting given in `--train-args` is fixed and not searched), writes them as a settings file and
trains `--seeds` runs with `train_ALGO.py --config FILE --seed S`, in `--chunks` pieces: after each
piece every run is scored on evaluation streams (evaluate.py --greedy, seed 10,000: never
training's), the mean is the trial's intermediate value, and Optuna's median pruner stops a trial
below the median of the others at the same point. The last piece's mean is the trial's value.
Training in chunks resumes each run's checkpoint (train.py's exact resume), so a pruned trial
costs only what it trained, and the trainers need no hook.

Storage is in each study's folder (experiments/frame/study.py): SQLite here, a journal file for
Slurm workers. A killed tuner, or a requeued Slurm worker, run again with the same command, says
how many finished trials it found and goes on; the trial it was running is retried in the same run
folders, from their checkpoints.

Then, per core: the best trial's settings as `OUT/NAME/MODEL.json` (`train_ppo.py --config` takes
it), Optuna's history and importance plots, and the best settings and the preset's trained again
on `--fresh-seeds` seeds no trial used (a study's best value is biased upward; the table reports
the fresh-seed result beside it). Writes NAME.json (space, budget, every trial, best settings,
fresh-seed per-seed results, machine, wall time) and NAME.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import warnings
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import optuna

import envs
from agents.command_line import make_parser as trainer_parser
from agents.config.a2c_config import preset_values, resolve_config
from agents.config.config_cli import flag_name, given_fields, parse_core_options, parse_env_options
from agents.config.search_space import Search, narrowed
from agents.config.settings_file import write_settings
from agents.cores import with_changed_defaults
from agents.learners.ppo import PPOTrainer
from agents.learners.train import Trainer
from agents.runtime.actors import LocalEnvs
from durable.records import write_json, write_text
from envs.cli import positive_int
from experiments.frame.curves import training_seconds
from experiments.frame.estimate import print_expected_time
from experiments.frame.flags import QUICK_ALGO, QUICK_CORE, QUICK_FRAMES, Distinct, add_experiment_arguments, output_name, runs_folder
from experiments.frame.jobs import EVAL_SEED, ROOT, Job, JobFailed, evaluate_job, evaluation, run_jobs, train_job
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.stats import iqm_interval, seed_count
from experiments.frame.study import (
    BudgetMismatch, SetupError, StudyBusy, finished, held, open_study, resume, run_trials, runs_of,
)
from experiments.frame.tables import format_interval, markdown_table
from experiments.frame.train_flags import split_train_args

TRAINERS: dict[str, type[Trainer]] = {"a2c": Trainer, "ppo": PPOTrainer}
OBJECTIVES = ("success", "return")  # evaluate.py's per-episode quantities a study may maximise
FRESH_SEED = 100  # the fresh-seed re-runs take seeds FRESH_SEED, FRESH_SEED + 1, ...: no trial's (trials take 0 .. --seeds - 1)
# The searched settings that set a run's speed, and the end of their range that is slow: the fewest
# new steps an update, the longest gradient window recomputed each update, the most epochs.
SLOW_END = {"rollout": min, "bptt": max, "update_epochs": max}
TUNER_SETS = ("--seed", "--total-steps", "--run-dir", "--resume", "--config", "--core", "--env", "--threads")  # --train-args may not


@dataclasses.dataclass(frozen=True, repr=False)
class Model:
    """One core of the comparison: its name (a folder, a row), the core and its options."""

    name: str
    core: str
    options: dict[str, Any]

    def __repr__(self) -> str:  # as the command line's errors name it
        return repr(self.name)


def model_of(text: str) -> Model:
    """`--cores` value CORE[:KEY=VALUE,...] as a Model named CORE-KEYVALUE-...: "feedback:span=16"
    -> feedback-span16."""
    core, _, options = text.partition(":")
    typed = parse_core_options(core, [options] if options else [])
    return Model("-".join([core, *(f"{key.replace('_', '')}{value}" for key, value in typed.items())]), core, typed)


def cores_arg(text: str) -> Model:
    try:
        return model_of(text)
    except (ValueError, KeyError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="tmaze", help="the env every trial trains on (default: tmaze)")
    parser.add_argument("--env-opt", action="append", default=[], metavar="KEY=VALUE", help="env option, e.g. length=16 (repeatable)")
    parser.add_argument("--cores", nargs="+", type=cores_arg, action=Distinct, key=lambda model: model.name, required=True,
                        metavar="CORE[:KEY=VALUE,...]", help="the cores compared, each with its options: lstm gru feedback:span=16")
    parser.add_argument("--core-opt", action="append", default=[], metavar="KEY=VALUE",
                        help="a core option for every core of --cores (each must take it)")
    parser.add_argument("--trials", type=positive_int, default=30, help="finished trials per core (default: 30)")
    parser.add_argument("--frames", type=positive_int, default=None, help=f"env frames per trial run (default: 200,000; {QUICK_FRAMES:,} with --quick)")
    parser.add_argument("--seeds", type=seed_count, default=2, help="training runs per trial, seeds 0 .. N-1 (default: 2)")
    parser.add_argument("--chunks", type=positive_int, default=4,
                        help="evaluations per trial run, the pruner's intermediate values: training stops and resumes at each (default: 4)")
    parser.add_argument("--eval-episodes", type=positive_int, default=100, help="greedy evaluation episodes per run and chunk (default: 100)")
    parser.add_argument("--objective", choices=OBJECTIVES, default="success",
                        help="what a study maximises: greedy success or return on evaluation streams, the mean over seeds (default: success)")
    parser.add_argument("--fresh-seeds", type=seed_count, default=5, help=f"fresh seeds the best settings and the preset train on after the search (default: 5, from {FRESH_SEED})")
    parser.add_argument("--space", action="append", default=[], metavar="NAME=RANGE",
                        help="narrow the space: NAME=LOW:HIGH, NAME=A,B (choices) or NAME=VALUE (fixed) (repeatable)")
    parser.add_argument("--train-args", default="", metavar="'FLAGS'",
                        help="train_ALGO.py flags every run takes, e.g. \"--bptt episode --no-previous-inputs\"; a setting given here is not searched")
    parser.add_argument("--workers", type=positive_int, default=4, help="slurm: worker jobs per study, each running trials (default: 4)")
    parser.add_argument("--storage", choices=("sqlite", "journal"), default=None,
                        help="where a study is kept (default: sqlite here, journal with --launcher slurm: a shared disk's file)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # a Slurm worker: run MODEL's trials, then exit
    add_experiment_arguments(parser, None, "output file stem (default: tune_ENV_ALGO)", quick="tiny models, runs and studies", algo=True, folder="tune")
    add_launcher_arguments(parser)
    return parser


def base_settings(parser: argparse.ArgumentParser, args: argparse.Namespace, trainer: type[Trainer]) -> dict[str, Any]:
    """The settings every trial of every core shares: the env, the CPU preset and --train-args,
    as config fields (read by the trainer's own parser, so a bad flag fails here, not in a trial)."""
    extra = split_train_args(parser, args.train_args)
    taken = sorted({arg.split("=")[0] for arg in extra} & set(TUNER_SETS))
    if taken:
        parser.error(f"--train-args may not give {', '.join(taken)}: the tuner sets them (--env and --cores are its own flags)")
    quick = ["--num-envs", "4", *QUICK_ALGO[args.algo]] if args.quick else []
    flags = trainer_parser(trainer, "").parse_args(["--preset", "cpu", *quick, *extra])
    if flags.core_opt:
        parser.error("give core options in --cores (CORE:KEY=VALUE) or --core-opt, not in --train-args")
    try:
        return {**given_fields(flags, trainer.config_class), "env": args.env, "env_options": parse_env_options(args.env_opt + flags.env_opt)}
    except ValueError as error:
        parser.error(str(error))


def model_settings(base: dict[str, Any], model: Model, core_opt: list[str], quick: bool) -> dict[str, Any]:
    """One core's settings: the shared ones, the core and its options (with --quick, its tiny size),
    with every default that has changed named, so that the settings files train the study's core
    after the next change of default (a best-settings file of an LSTM without `gate_init` would
    have trained torch's biases before 2026-11-27, chrono's until 2026-12-06, torch's since)."""
    options = {**parse_core_options(model.core, core_opt), **model.options}
    if quick:
        options = {**parse_core_options(model.core, [QUICK_CORE[model.core]]), **options}
    return {**base, "core": model.core, "core_options": with_changed_defaults(model.core, options)}


def slowest_corner(space: dict[str, Search]) -> dict[str, Any]:
    """The values of the searched settings that set a run's speed (SLOW_END) at their slow end:
    the corner of the space whose runs the tuner's second estimate times (a trial of longer
    rollouts than the preset's runs faster than the preset)."""
    corner = {}
    for name, end in SLOW_END.items():
        search = space.get(name)
        if search is None:
            continue
        values = [value for value in search.choices if isinstance(value, (int, float))] if search.choices else [search.low, search.high]
        if values:
            corner[name] = int(end(values)) if search.choices or search.integer else end(values)
    return corner


def searched_space(parser: argparse.ArgumentParser, args: argparse.Namespace, trainer: type[Trainer], base: dict[str, Any]):
    """(the space every study searches, the settings fixed by --space): the learner's space less
    what --train-args sets, narrowed by --space; PPO's minibatch counts kept to divisors of the envs."""
    space = {name: search for name, search in trainer.config_class.search_space.items() if name not in base}
    try:
        space, fixed = narrowed(space, args.space)
    except ValueError as error:
        parser.error(str(error))
    if "num_minibatches" in space:
        envs_per_update = base.get("num_envs", preset_values(args.env, "lstm", base.get("preset", "cpu"))[0].get("num_envs", 64))
        choices = tuple(count for count in space["num_minibatches"].choices if envs_per_update % count == 0)
        if not choices:
            parser.error(f"no --space num_minibatches choice divides the {envs_per_update} envs")
        space["num_minibatches"] = dataclasses.replace(space["num_minibatches"], choices=choices)
    return space, fixed


def chunk_frames(frames: int, chunk: int, chunks: int) -> int:
    """Frames trained by the end of chunk `chunk` (1 .. chunks)."""
    return max(1, round(frames * chunk / chunks))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = make_parser()
    args = parser.parse_args(argv)
    trainer = TRAINERS[args.algo]
    args.name = output_name(args, f"tune_{envs.short_name(args.env)}")
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / args.name)
    storage = args.storage or ("journal" if args.launcher == "slurm" else "sqlite")
    frames = args.frames or (QUICK_FRAMES if args.quick else 200_000)
    episodes = 4 if args.quick else args.eval_episodes
    seeds = list(range(args.seeds))
    fresh_seeds = [FRESH_SEED + index for index in range(args.fresh_seeds)]
    base = base_settings(parser, args, trainer)
    space, fixed = searched_space(parser, args, trainer, base)
    base = {**base, **fixed}
    models = {model.name: model for model in args.cores}
    try:  # every core's settings make a valid config, and the env takes its options, before anything is written
        settings = {name: model_settings(base, model, args.core_opt, args.quick) for name, model in models.items()}
        for values in settings.values():
            resolve_config(values, trainer.config_class)
        LocalEnvs(args.env, [0], base["env_options"]).close()
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    budget = {"env": args.env, "algo": args.algo, "frames": frames, "seeds": seeds, "trials": args.trials, "chunks": args.chunks,
              "eval_episodes": episodes, "objective": args.objective,
              "space": {name: search.to_dict() for name, search in space.items()},
              "fixed": {key: value for key, value in base.items()}}
    if args.worker is not None and args.worker not in models:
        parser.error(f"--worker {args.worker} is not one of --cores {sorted(models)}")
    names = [args.worker] if args.worker else list(models)
    print(f"{len(names)} studies ({', '.join(names)}) of {args.trials} trials each, the same for every core: {args.seeds} runs of "
          f"{frames:,} frames a trial, greedy {args.objective} on {episodes} evaluation episodes after each of {args.chunks} chunks; "
          f"{trainer.script}, {args.env}; runs {where_runs_go(args)}, in {runs_dir}")
    print("searched: " + ("; ".join(f"{name} {search.describe()}" for name, search in space.items()) or "nothing"))
    print("fixed: " + ", ".join(f"{key}={value}" for key, value in base.items()))
    folders = {name: runs_dir / name for name in models}
    try:  # every study of this name, those of other calls too, at one budget
        studies = {name: open_study(runs_dir / name, storage, budget) for name in sorted(
            {*names, *(path.parent.name for path in runs_dir.glob(f"*/study.{'db' if storage == 'sqlite' else 'journal'}"))})}
    except BudgetMismatch as error:
        parser.error(str(error))
    preset_files = {name: folders[name] / "preset.json" for name in models}
    for name in models:  # what the fresh-seed comparison trains the tuned settings against
        write_settings(preset_files[name], trainer.script, settings[name], f"experiments.tune: study {args.name}, model {name}: the preset")
    if not (args.quick or args.no_estimate or args.worker):
        left = {name: max(0, args.trials - len(finished(studies[name]))) * len(seeds) for name in names}
        estimates = [("at the preset's settings", [])]
        corner = slowest_corner(space)
        if corner:
            estimates.append((f"at the slowest settings the space holds ({', '.join(f'{key} {value}' for key, value in corner.items())})",
                              [arg for key, value in corner.items() for arg in (flag_name(key), str(value))]))
        for what, flags in estimates:
            print(f"the search's runs {what}:")
            print_expected_time([train_job(f"{name} estimate {index}", folders[name] / "estimate" / str(index),
                                           ["--config", str(preset_files[name]), *flags], frames, args.algo)
                                 for name in names for index in range(left[name])], args.jobs)
    started = time.time()

    if args.launcher == "local":
        for name in names:
            study = studies[name]
            try:
                with held(folders[name]) if args.worker is None else contextlib.nullcontext():
                    print(f"study {name}: {resume(study, args.trials)}", flush=True)
                    run_trials(study, space, args.trials, trial_objective(args, folders[name], settings[name], trainer.script, frames, seeds, episodes))
            except (StudyBusy, SetupError, JobFailed) as error:
                sys.exit(f"error: {error}")
        if args.worker is not None:
            return
    else:
        workers = [worker_job(argv, name, folders[name], index, args) for name in names for index in range(args.workers)]
        run_stages({"tuning": workers}, args)
    short = [name for name in models if len(finished(studies[name])) < args.trials]
    if short:
        sys.exit(f"error: studies {short} have fewer than {args.trials} finished trials; run the same command again")

    best = {name: studies[name].best_trial for name in models}
    args.out.mkdir(parents=True, exist_ok=True)
    best_files = {}
    for name, trial in best.items():
        best_files[name] = args.out / args.name / f"{name}.json"
        write_settings(best_files[name], trainer.script, {**settings[name], **trial.params},
                       f"experiments.tune: study {args.name}, model {name}, trial {trial.number} "
                       f"(greedy {args.objective} {trial.value:.4g}, mean of {len(seeds)} seeds)")
    fresh = {(name, kind, seed): folders[name] / (f"fresh-trial{best[name].number:03d}" if kind == "tuned" else "fresh-preset") / f"seed{seed}"
             for name in models for kind in ("tuned", "preset") for seed in fresh_seeds}
    files = {"tuned": best_files, "preset": preset_files}
    training = [train_job(f"{name} {kind} seed {seed}", run, ["--config", str(files[kind][name]), "--seed", str(seed)], frames, args.algo)
                for (name, kind, seed), run in fresh.items()]
    scored = {key: evaluate_job(run, episodes, frames, greedy=True) for key, run in fresh.items()}
    if not (args.quick or args.no_estimate):
        print_expected_time(training, args.jobs)
    run_stages({"fresh-seed training": training, "fresh-seed evaluation": list(scored.values())}, args)

    summary = report(args, studies, models, best, best_files, scored, fresh, budget, storage, time.time() - started, argv)
    write_json(args.out / f"{args.name}.json", summary, indent=1)
    write_text(args.out / f"{args.name}.md", table(summary))
    for name in models:
        draw_study(studies[name], args.out / args.name / name)
    print(table(summary))


def trial_objective(args: argparse.Namespace, folder: Path, settings: dict[str, Any], script: str, frames: int, seeds: list[int],
                    episodes: int):
    """The objective of one core's study (`settings`: its fixed ones): a trial's values written
    with them as TRIAL/settings.json, its seeds trained in `args.chunks` pieces of `frames` in
    TRIAL/seedS (resumed from their checkpoints), each piece scored by the mean greedy objective
    on evaluation streams, reported to the pruner. A piece already scored (a retried trial) is
    read, not run again."""
    def objective(trial: optuna.trial.Trial, values: dict[str, Any]) -> float:
        trial_dir = folder / f"trial{runs_of(trial):03d}"
        config = trial_dir / "settings.json"
        write_settings(config, script, {**settings, **values}, f"experiments.tune: study {args.name}, model {folder.name}, trial {trial.number}")
        runs = [trial_dir / f"seed{seed}" for seed in seeds]
        value = 0.0
        for chunk in range(1, args.chunks + 1):
            reached = chunk_frames(frames, chunk, args.chunks)
            scored = [evaluate_job(run, episodes, reached, greedy=True, tag=f"chunk{chunk}") for run in runs]
            training = [train_job(f"trial {trial.number} seed {seed}", run, ["--config", str(config), "--seed", str(seed)], reached, args.algo)
                        for seed, run, score in zip(seeds, runs, scored) if not score.done]
            for what, jobs in ((f"trial {trial.number}, chunk {chunk}: training", training),
                               ("evaluation", [score for score in scored if not score.done])):
                if jobs:
                    run_jobs(jobs, args.jobs, what)
            value = float(np.mean([objective_value(score, args.objective) for score in scored]))
            trial.report(value, chunk)
            if chunk < args.chunks and trial.should_prune():
                raise optuna.TrialPruned()
        return value
    return objective


def worker_job(argv: list[str], name: str, folder: Path, index: int, args: argparse.Namespace) -> Job:
    """Slurm worker `index` of study `name`: this command run on a node as `--worker NAME`, with
    the local launcher (its seeds in parallel on the job's CPUs) and the journal storage."""
    command = [sys.executable, "-m", "experiments.tune", *argv, "--launcher", "local", "--storage", "journal",
               "--worker", name, "--jobs", str(args.slurm_cpus_per_job)]
    return Job(f"tune {name} worker {index}", lambda: command, folder / f"worker{index}.log", folder / f"worker{index}.done.json",
               f"{args.trials} trials")


def objective_value(job: Job, objective: str) -> float:
    """The agent's mean greedy `objective` from a finished evaluation; a JobFailed naming the
    quantities the env reports if it has no such one (a setup error, not a bad setting)."""
    agent = evaluation(job)["agent"]
    if objective not in agent:
        raise SetupError(f"--objective {objective}: the env reports {sorted(agent)} per episode, not {objective!r}")
    return agent[objective]


def report(args: argparse.Namespace, studies: dict, models: dict[str, Model], best: dict, best_files: dict[str, Path], scored: dict,
           fresh: dict, budget: dict, storage: str, seconds: float, argv: list[str]) -> dict:
    """The JSON: the budget and space, every trial of every study, the best settings, and the
    fresh-seed runs of the best settings and the preset, per seed and as IQM with 95% intervals."""
    summary = {"command": "python -m experiments.tune " + shlex.join(argv), "machine": launcher_description(args), "storage": storage,
               "budget": budget, "fresh_seeds": sorted({seed for _, _, seed in fresh}), "evaluation_seed": EVAL_SEED,
               "wall_seconds_this_invocation": round(seconds, 1), "models": {}}
    for name, model in models.items():
        trials = [{"number": trial.number, "state": trial.state.name, "value": trial.value, "params": trial.params,
                   "intermediate": {str(step): value for step, value in sorted(trial.intermediate_values.items())},
                   **{key: trial.user_attrs[key] for key in ("runs_of", "worker", "error", "stopped", "surplus") if key in trial.user_attrs},
                   "seconds": (trial.datetime_complete - trial.datetime_start).total_seconds()
                   if trial.datetime_complete and trial.datetime_start else None}
                  for trial in studies[name].get_trials(deepcopy=False)]
        per_seed = {kind: [{"seed": seed, args.objective: objective_value(scored[name, kind, seed], args.objective),
                            "training_seconds": round(training_seconds(fresh[name, kind, seed]), 1)}
                           for seed in summary["fresh_seeds"]]
                    for kind in ("tuned", "preset")}
        stats = iqm_interval({kind: np.array([run[args.objective] for run in runs]) for kind, runs in per_seed.items()})
        summary["models"][name] = {
            "core": model.core, "core_options": model.options,
            "finished": sum(trial["state"] in ("COMPLETE", "PRUNED") for trial in trials),
            "pruned": sum(trial["state"] == "PRUNED" for trial in trials), "trials": trials,
            "best": {"trial": best[name].number, "value": best[name].value, "params": best[name].params,
                     "settings_file": str(best_files[name].relative_to(ROOT) if best_files[name].is_relative_to(ROOT) else best_files[name])},
            "fresh": {kind: {"per_seed": runs, **stats[kind]} for kind, runs in per_seed.items()},
        }
    return summary


def table(summary: dict) -> str:
    """NAME.md: per core, the search, its best trial and the fresh-seed results of the best
    settings and of the preset."""
    objective = summary["budget"]["objective"]
    budget = summary["budget"]
    caption = (f"Greedy {objective} on evaluation streams. Each core: {budget['trials']} finished trials of {len(budget['seeds'])} "
               f"seeds x {budget['frames']:,} frames (median pruning after each of {budget['chunks']} chunks). The best trial's value "
               f"is its own seeds' mean, biased upward by the search; the fresh-seed columns train its settings and the preset's "
               f"again on seeds {summary['fresh_seeds']}: IQM [95% bootstrap CI].")
    rows = []
    for name, model in summary["models"].items():
        fresh = model["fresh"]
        settings = ", ".join(f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}" for key, value in model["best"]["params"].items())
        per_seed = lambda kind: ", ".join(f"{run[objective]:.2f}" for run in fresh[kind]["per_seed"])  # noqa: E731
        rows.append([name, f"{model['finished']} ({model['pruned']} pruned)", f"{model['best']['value']:.2f} (trial {model['best']['trial']})",
                     format_interval(fresh["tuned"]), per_seed("tuned"), format_interval(fresh["preset"]), per_seed("preset"), settings])
    return markdown_table(["model", "trials", "best trial", "tuned, fresh seeds", "tuned per seed", "preset, fresh seeds", "preset per seed",
                           "best settings"], rows, caption)


def draw_study(study: optuna.Study, stem: Path) -> None:
    """Optuna's optimisation history and setting importances (matplotlib) as STEM-history.png
    and STEM-importance.png; the importances need two completed trials that differ, and say so."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as optuna_plots

    stem.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # Optuna's matplotlib plots are marked experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        for kind, plot in (("history", optuna_plots.plot_optimization_history), ("importance", optuna_plots.plot_param_importances)):
            try:
                axes = plot(study)
            except (ValueError, RuntimeError) as error:
                print(f"no {kind} plot for {stem.name}: {error}")
                continue
            axes.figure.savefig(f"{stem}-{kind}.png", dpi=120, bbox_inches="tight")
            plt.close(axes.figure)


if __name__ == "__main__":
    main()
