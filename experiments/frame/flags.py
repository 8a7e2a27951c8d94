"""What the experiments' command lines share beyond envs/cli.py's types: the flags that end each
experiment's own (add_experiment_arguments: its name, run folder, outputs, --quick and learner),
the folder of assets/ each experiment's results go to (results_folder), list flags whose values
must differ, and the frame budget of `--quick`.

Each value of --envs, --cores, --spans, --lengths (and the other list flags) names runs of its
own: a run folder, a row of the table. A value given twice would train two processes in one
folder at once (mazes.py) or fill the table with the same row twice, so it is refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from envs.cli import positive_int

ASSETS = Path(__file__).resolve().parents[2] / "assets"  # the results: one folder per experiment, assets/EXPERIMENT/
QUICK_FRAMES = 4_096  # --quick's runs when --frames is not given: a test of the pipeline in seconds
QUICK_ALGO = {"a2c": [], "ppo": ["--num-minibatches", "2"],  # --quick runs have 4 envs, which PPO's 8 minibatches cannot split
              # DQN learns from its 512th frame (not 10,000: a quick run has 4,096) in batches of 4 from a small replay
              "dqn": ["--learning-starts", "512", "--batch-size", "4", "--replay-capacity", "4096"]}
# The Feedback memory's ways of keeping the cue (agents/cores/feedback/reference.py) as --core-opt,
# one row each in the experiments that run them; the tanh write is read raw, with the orthogonal value path
KEEPING_OPTIONS = {"carry": "carry=gate", "kept": "keep_slot=True", "tanh": "memory_write=tanh,read_norm=False,value_init=orthogonal"}
# --quick's tiny size of each core (--core-opt); a runner that gives the attention cores a span adds it
QUICK_CORE = {"feedback": "d_model=16,n_heads=2", "transformer": "d_model=16,n_heads=2", "lstm": "hidden_size=16",
              "gru": "hidden_size=16", "ffm": "d_model=16,memory_size=4", "lru": "d_model=16,state_size=8",
              "mamba": "d_model=16,d_state=4,n_layers=1", "mlp": "hidden_size=16"}

# The experiments whose results were made before 2026-11-27 train the LSTM as they did then, with
# torch's initialisation, named (agents/cores/lstm.py: its default was chrono's from 2026-11-27 to
# 2026-12-06), which their JSON and pages name; flags given after these (--train-args) win.
PUBLISHED_INIT = {"lstm": ["--core-opt", "gate_init=pytorch"]}


def as_published(core: str) -> list[str]:
    """The --core-opt flags that build core `core` as the published results ran it: the LSTM
    with torch's gate biases, the others at their defaults (no flags)."""
    return PUBLISHED_INIT.get(core, [])


def results_folder(folder: str | None) -> Path:
    """Where an experiment's results go without --out: assets/FOLDER, the folder of the experiment
    that writes them (its JSON, table, figure and sweep ledger), so that a sweep run again finds
    its ledger there. None is assets/ itself, for a runner not yet given a folder."""
    if folder is not None and (not folder or "/" in folder or folder.startswith(".")):
        raise ValueError(f"folder {folder!r}: give one folder name under assets/, e.g. 'memory_length'")
    return ASSETS / folder if folder else ASSETS


def run_frames(args: argparse.Namespace, budget: int) -> int:
    """A run's frames: --frames where given, QUICK_FRAMES with --quick, else the experiment's `budget`."""
    if args.frames:
        return args.frames
    return QUICK_FRAMES if args.quick else budget


class Distinct(argparse.Action):
    """`action=Distinct` for a list flag (nargs "+" or "*"): exit 2 if two of its values are the
    same by `key` (default: equal; for envs, `key=envs.short_name`, since "maze" and
    "FeedbackRL/Maze-v0" are one env and one run folder)."""

    def __init__(self, option_strings, dest, key: Callable[[Any], Any] | None = None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.key = key or (lambda value: value)

    def __call__(self, parser, namespace, values, option_string=None):
        seen = {}
        for value in values:
            key = self.key(value)
            if key in seen:
                twice = f"{value!r} is given twice" if seen[key] == value else f"{seen[key]!r} and {value!r} are the same"
                raise argparse.ArgumentError(self, f"{twice}; give each once")
            seen[key] = value
        setattr(namespace, self.dest, values)


def add_experiment_arguments(parser: argparse.ArgumentParser, name: str | None, name_help: str, runs_dir: str = "runs/experiments/NAME",
                             quick: str = "tiny models and runs", algo: bool = False, minibatches: bool = False,
                             folder: str | None = None, dqn: bool = False) -> None:
    """The flags that end an experiment's own, before the launcher's (experiments/frame/launch.py):
    --name (the output file stem: `name`, or None for main to derive it; `name_help` says which),
    --runs-dir (`runs_dir`: where runs go without it), --out (default assets/`folder`: the
    experiment's folder, see results_folder), --no-estimate and --quick (`quick`: what its runs
    are); with `algo`, --algo (output_name adds the learner to the name), and with `minibatches`,
    PPO's --num-minibatches too (minibatch_args checks it). `dqn`: --algo takes dqn too
    (train_dqn.py), for a runner that leaves A2C's own flags (--bptt, --entropy-coef) out of its
    DQN runs, which train_dqn.py refuses."""
    from experiments.frame.jobs import ALGOS

    if minibatches and not algo:
        raise ValueError("minibatches=True needs algo=True: --num-minibatches is a PPO setting, chosen with --algo ppo")
    parser.add_argument("--name", default=name, help=name_help)
    parser.add_argument("--runs-dir", type=Path, default=None, help=f"where runs go (default: {runs_dir})")
    out = results_folder(folder)
    parser.add_argument("--out", type=Path, default=out, help=f"where results go (default: {out.relative_to(ASSETS.parent).as_posix()}/)")
    parser.add_argument("--no-estimate", action="store_true", help="start without timing an update of each model first")
    parser.add_argument("--quick", action="store_true", help=f"{quick}, to test the pipeline")
    if dqn and not algo:
        raise ValueError("dqn=True needs algo=True: dqn is a choice of --algo")
    if algo:
        algos = ALGOS if dqn else tuple(name for name in ALGOS if name != "dqn")
        parser.add_argument("--algo", choices=algos, default="a2c",
                            help="the learner: a2c (train_a2c.py, default), ppo (train_ppo.py)" + (", dqn (train_dqn.py)" if dqn else "")
                                 + "; another learner's outputs and runs take a _ALGO suffix")
    if minibatches:
        parser.add_argument("--num-minibatches", type=positive_int, default=None,
                            help="with --algo ppo: minibatches per epoch, each a subset of whole envs (default: train_ppo.py's, 8)")


def output_name(args: argparse.Namespace, stem: str) -> str:
    """The output file stem: --name where given, else `stem`, with _ALGO for a learner other than A2C."""
    return args.name or (stem if args.algo == "a2c" else f"{stem}_{args.algo}")


def runs_folder(args: argparse.Namespace, default: Path) -> Path:
    """Where an experiment's runs go: --runs-dir when given, else `default`, and with --quick a
    folder of its own beside it (DEFAULT-quick): a full run resumes a finished run's checkpoint
    in its folder, and would otherwise carry on a quick run's tiny model."""
    if args.runs_dir is not None:
        return args.runs_dir
    return default.with_name(default.name + "-quick") if args.quick else default


def minibatch_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The runs' --num-minibatches flags ([] when not given); exit 2 if it was given without --algo ppo."""
    if args.num_minibatches is None:
        return []
    if args.algo != "ppo":
        parser.error(f"--num-minibatches {args.num_minibatches} is a PPO setting; it needs --algo ppo (got --algo {args.algo})")
    return ["--num-minibatches", str(args.num_minibatches)]

