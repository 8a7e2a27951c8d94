"""Does a way of keeping the cue move the probe it aims at, before any training? Fresh policies probed.

    python -m experiments.keep_cue                       # L = 64, 5 seeds, the paper's model and each design
    python -m experiments.keep_cue --lengths 64 256 --seeds 3

The Feedback memory's ways of keeping the cue (agents/cores/feedback/reference.py: a gated carry,
a kept slot, the memory bounded as written and read raw) each aim at a number of
experiments/memory_probes.py. This builds, for each design and seed, the policy a recall run
of experiments/frames_to_solve.py starts from (the same flags: experiments/memory_length.py's
model rows, the cpu preset, the recall task without the clock) and probes it on 64 episodes
walked to the query (experiments/cue_memory.py: walk_to_query):

- `retention`: the share of the cue's part of the memory vector that survives a step (geometric
  mean over the walk); what is left at the query is about retention^L;
- `gradient_to_cue`: the gradient of the right answer's log-probability at the query to the
  input at the cue's step, over that to the query's input: the learning signal that reaches the
  cue;
- `cue_separation`: whether the core's output at the query tells the two bits apart.

A design is worth training where it moves its number well above the paper's model's fresh one.
Writes OUT/keep_cue_fresh.json (per seed, with the command, machine and wall time) and .md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from agents import command_line
from agents.evaluation import new_policy
from agents.learners.train import Trainer
from agents.runtime.seeding import seed_everything
from durable.records import write_json, write_text
from experiments.cue_memory import EPISODES, walk_to_query
from experiments.frame.flags import results_folder
from experiments.frame.jobs import machine
from experiments.frame.tables import markdown_table
from experiments.frames_to_solve import task_args
from experiments.memory_length import model_args
from experiments.memory_probes import probe

DESIGNS = ("feedback-span16", "feedback-span16-carry", "feedback-span16-kept", "feedback-span16-tanh")
KEPT = ("retention", "kept_retention", "gradient_to_cue", "cue_separation")  # (kept_retention: the kept slot's, where there is one)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=DESIGNS, default=list(DESIGNS), help="the paper's model and the designs (default: all)")
    parser.add_argument("--lengths", nargs="+", type=int, default=[64], help="recall lengths L (default: 64)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1 (default: 5)")
    parser.add_argument("--out", type=Path, default=results_folder("memory_length"), help="where keep_cue_fresh.json goes (default: assets/memory_length/)")
    return parser


def fresh_policy(model: str, length: int, seed: int):
    """The policy a frames-to-solve recall run of `model` at `length` starts from (its flags, its
    config, its seed), and the task's env options."""
    flags = [*task_args(length), *model_args(model, "memory_length", length, quick=False), "--seed", str(seed)]
    config = command_line.new_run_config(Trainer, command_line.make_parser(Trainer, "").parse_args(flags))
    seed_everything(seed)
    return new_policy(config).eval(), config.env_options


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    bad = [length for length in args.lengths if length < 2]
    if bad or args.seeds < 1:
        parser.error(f"--lengths must be >= 2 and --seeds >= 1, got {args.lengths} and {args.seeds}")
    torch.set_num_threads(1)
    started = time.time()
    result = {"command": "python -m experiments.keep_cue " + shlex.join(sys.argv[1:] if argv is None else argv), "machine": machine(1),
              "episodes": EPISODES, "models": {}}
    for length in args.lengths:
        for model in args.models:
            per_seed = []
            for seed in range(args.seeds):
                policy, env_options = fresh_policy(model, length, seed)
                numbers = probe(policy, walk_to_query(env_options, EPISODES))
                per_seed.append({"seed": seed, **{key: float(numbers[key]) for key in KEPT if key in numbers}})
                print(f"L {length} {model} seed {seed}: " + ", ".join(f"{key} {value:.3g}" for key, value in per_seed[-1].items() if key != "seed"), flush=True)
            median = {key: float(np.median([run[key] for run in per_seed])) for key in KEPT if key in per_seed[0]}
            result["models"].setdefault(model, {})[str(length)] = {"per_seed": per_seed, "median": median}
    result["wall_seconds"] = round(time.time() - started, 1)
    write_json(args.out / "keep_cue_fresh.json", result, indent=1)
    write_text(args.out / "keep_cue_fresh.md", table(result))
    print(table(result))


def table(result: dict) -> str:
    """A row per model and length: each number's median over seeds and its range."""
    rows = []
    for model, lengths in result["models"].items():
        for length, cell in lengths.items():
            def spread(key: str) -> str:
                if key not in cell["median"]:
                    return "-"
                values = [run[key] for run in cell["per_seed"]]
                return f"{cell['median'][key]:.3g} ({min(values):.3g} .. {max(values):.3g})"
            rows.append([model, length, *(spread(key) for key in KEPT)])
    return (f"Fresh policies (before any update) of the recall runs, {result['episodes']} episodes walked to the query; "
            f"median over seeds (range). `{result['command']}`\n\n"
            + markdown_table(["model", "L", "retention a step", "kept slot's retention", "gradient to cue", "cue separation at the query"], rows))


if __name__ == "__main__":
    main()
