"""A recall run tried at lengths it did not train on: greedy success at L/2, 2L, 4L and 8L.

    python -m experiments.past_length runs/experiments/frames_to_solve/gru-chrono/L64/seed0

Whether a memory that solves L holds at 2L is the other half of "how far back" (Bakija et al.,
arXiv 2605.12206: monostable recurrences fail past the horizon they trained on, multistable ones
hold). The run's final policy plays `--episodes` greedy episodes of the recall task
(FeedbackRL/MemoryLength-v0) at each length, its other env options as it trained, on evaluation
streams (agents/learners/play.py). For the answer to mean anything the observation must say the
same thing at every length: the run must have trained with `show_time=False` (a clock of L + 1
categories meets ones it never embedded past L), so a run with the clock is refused. The
Transformer over the episode keeps the span it trained with (L + 1), so its two layers reach
2 (L + 1) steps back: at 4L and 8L (L >= 2) it cannot see the bit by construction, a check that
this measurement can fail; at 2L it still can, through both layers.

`--lengths` tries other lengths instead (the trained one among them if asked: a policy that
answers at L and at 8L but not between keys its answer to the length, not to a held memory).

Only a solved run (RUN/solve.json, agents/learners/solve.py) is tried; an unsolved one prints
`"solved": false` and nothing else. The last line printed is the JSON the sweep keeps
(experiments/frames_to_solve.py): {"run", "solved", "trained_length", "success": {length: mean}}.
"""

from __future__ import annotations

import argparse
import json

import torch

from agents.evaluation import load_run
from agents.learners.play import play_episodes
from agents.learners.solve import RECORD
from durable.records import read_record
from envs import short_name
from envs.cli import positive_int
from experiments.frame.jobs import EVAL_SEED

MULTIPLES = (0.5, 2, 4, 8)  # of the trained length L


def tried_lengths(length: int) -> list[int]:
    """L/2 (where it is a length, L >= 2), 2L, 4L, 8L."""
    return [round(length * m) for m in MULTIPLES if length * m >= 1 and float(length * m).is_integer()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a recall run's folder (checkpoint.pt and solve.json)")
    parser.add_argument("--episodes", type=positive_int, default=100, help="greedy episodes per length (default: 100)")
    parser.add_argument("--lengths", type=positive_int, nargs="+", default=None,
                        help="the lengths to try (default: L/2, 2L, 4L and 8L of the trained length L)")
    args = parser.parse_args(argv)
    run = load_run(args.run, torch.device("cpu"))
    options = dict(run.config.env_options)
    if short_name(run.config.env) != "memory_length":
        parser.error(f"{args.run} trained on {run.config.env!r}; this tries recall runs (memory_length) at other lengths")
    if options.get("show_time", True):
        parser.error(f"{args.run} trained with the clock shown (show_time=True), whose categories past its length it never embedded; "
                     "only runs trained with show_time=False can be tried at other lengths")
    solve = read_record(f"{args.run}/{RECORD}")
    solved = isinstance(solve, dict) and solve.get("solved") is True
    result = {"run": args.run, "solved": solved, "trained_length": options["length"]}
    if solved:
        success = {}
        for length in args.lengths or tried_lengths(options["length"]):
            played = play_episodes(run.policy, run.device, run.config.env, {**options, "length": length}, args.episodes, EVAL_SEED,
                                   args.episodes, greedy=True)
            success[str(length)] = float(played["success"].mean())
        result["success"] = success
    print(json.dumps(result))


if __name__ == "__main__":
    main()
