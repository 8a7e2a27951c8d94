"""Why success on the memory length task falls with length: each run's memory path, probed.

    python -m experiments.recall_cliff                                  # the recall headline's runs
    python -m experiments.recall_cliff --name NAME --models feedback-span16 transformer-span16
    python -m experiments.recall_cliff --name frames_to_solve --models lstm --lengths 32 64   # where a sweep stopped

For every run of a memory length sweep on the recall task (experiments/memory_length.py --env
memory_length, or experiments/frames_to_solve.py: its NAME.json and run folders), two policies,
each fed 64 episodes of the run's length answered 0 up to the query (experiments/cue_memory.py:
walk_to_query) and probed (experiments/memory_probes.py):

- the run's final policy, and
- a fresh policy of its config and seed, before any update: what the learner starts from.

The numbers that name a cause of the cliff, per run:

- `gradient_to_cue`: the gradient of the log-probability of the right answer at the query step
  with respect to the core's input at the step that showed the bit, over that with respect to the
  input at the query step. 0 where no path reaches back that far (a Transformer whose L steps
  exceed its reach, layers x span); where it is orders of magnitude below the solved lengths'
  in the fresh policy, the learning signal that would teach the core to keep the bit hardly
  reaches the step that has it;
- `cue_separation`: whether the core's output at the query still tells the two bits apart
  (cue_memory.py's measure; about 0 when it does not);
- for the Feedback core, `retention`: the share of the bit's part of the memory vector that
  survives a step (memory_probes.py), whose L-th power is what is left of it at the query.

Writes NAME_probes.json (per seed: greedy success beside both policies' numbers; the command,
machine and wall time) and NAME_probes.md. A run already in NAME_probes.json is kept as it is,
not probed again: a sweep resumed on another machine (experiments/frame/ledger.py) has no run
folder, no checkpoint, for the runs it trained before, so each sitting probes the runs it
trained (the sweep's JSON is written after each length). Delete the file to probe them all again.
`--models` and `--lengths` narrow what a call probes; the file keeps what earlier calls probed
outside them, so a narrow call adds to it.
The runs of a length the JSON does not hold yet (a sweep stopped in the middle of one) are probed
too where their checkpoints are here, found with their greedy success in the sweep's ledger
(NAME_runs.json), and marked in the table as a length under way.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from durable.records import read_record, write_json, write_text
from experiments.cue_memory import EPISODES, trained_and_fresh, walk_to_query
from envs.cli import positive_int
from experiments.frame.calls import every_call
from experiments.frame.flags import Distinct, results_folder
from experiments.frame.jobs import ROOT, evaluation_means, machine
from experiments.frame.tables import markdown_table
from experiments.memory_probes import probe

NAME = "memory_length_recall_headline"
KEPT = ("gradient_to_cue", "value_gradient_to_cue", "cue_separation", "retention", "kept_retention")  # of probe()'s numbers, per policy


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default=NAME, help=f"the sweep: OUT/NAME.json and its run folders (default {NAME})")
    parser.add_argument("--models", nargs="+", default=None, help="the sweep's models to probe (default: all of them)")
    parser.add_argument("--lengths", nargs="+", type=positive_int, action=Distinct, default=None,
                        help="the lengths to probe (default: every length of the sweep)")
    parser.add_argument("--runs-dir", type=Path, default=None, help="the sweep's run folders (default: runs/experiments/NAME)")
    parser.add_argument("--out", type=Path, default=results_folder("memory_length"),
                        help="where NAME.json is and the probes go (default: assets/memory_length/)")
    parser.add_argument("--episodes", type=int, default=EPISODES, help=f"episodes walked per policy (default {EPISODES})")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    source = args.out / f"{args.name}.json"
    sweep = read_record(source)
    if sweep is None:
        parser.error(f"no sweep at {source}; give --name of an experiments.memory_length run (and --out where its JSON is)")
    task = sweep.get("env") or sweep.get("task", "").split(",")[0]  # memory_length's sweeps name the env, frames_to_solve's the task
    if task != "memory_length":
        parser.error(f"{source} is a sweep on {task!r}; the probes walk the memory length task (--env memory_length)")
    runs_dir = args.runs_dir or ROOT / "runs" / "experiments" / args.name
    under_way = unfinished(args.out / f"{args.name}_runs.json", sweep, runs_dir)
    known = [*sweep["models"], *(model for model in under_way if model not in sweep["models"])]  # a model's first length may be under way
    models = args.models or known
    unknown = [model for model in models if model not in known]
    if unknown:
        parser.error(f"--models: {', '.join(unknown)} not in {source} or its ledger; they have {', '.join(known)}")
    if args.episodes < 2:
        parser.error(f"--episodes must be at least 2 (both bits), got {args.episodes}")
    started = time.time()
    try:
        probed, before = probed_before(args.out / f"{args.name}_probes.json", args.episodes)
    except ValueError as error:
        parser.error(str(error))
    kept = 0
    command = "python -m experiments.recall_cliff " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = {"command": command, "commands": every_call(before, command),  # every call whose probes the file holds
              "machine": machine(1), "source": source.name, "episodes": args.episodes, "models": {}}
    cells = [(model, length, cell["per_seed"], False) for model in models for length, cell in sweep["models"].get(model, {"lengths": {}})["lengths"].items()]
    cells += [(model, length, runs, True) for model, lengths in under_way.items() if model in models for length, runs in lengths.items()]
    missing = sorted(set(args.lengths or ()) - {int(length) for _, length, _, _ in cells})
    if missing:
        parser.error(f"--lengths: {', '.join(map(str, missing))} not run for {', '.join(models)} in {source} or its ledger; "
                     f"they have {', '.join(sorted({length for _, length, _, _ in cells}, key=int))}")
    cells = [cell for cell in cells if args.lengths is None or int(cell[1]) in args.lengths]
    selected = {(model, length) for model, length, _, _ in cells}
    for model, lengths in before.get("models", {}).items():  # what earlier calls probed outside this call's models and lengths stays as it was
        for length, cell in lengths.items():
            if (model, length) not in selected:
                result["models"].setdefault(model, {})[length] = cell
    for model, length, runs, partial in cells:
        per_seed = []
        for run in runs:
            run_dir = runs_dir / model / f"L{length}" / f"seed{run['seed']}"
            if (model, length, run["seed"]) in probed:
                per_seed.append(probed[model, length, run["seed"]])
                kept += 1
            elif not partial or (run_dir / "checkpoint.pt").exists():  # a length under way: the runs trained here
                per_seed.append({"seed": run["seed"], "greedy_success": greedy_success(run), **probe_run(str(run_dir), args.episodes)})
                print(f"{model} L{length} seed {run['seed']}: " + ", ".join(
                    f"{key} {per_seed[-1]['fresh'][key]:.2e} -> {per_seed[-1]['trained'][key]:.2e}" for key in ("gradient_to_cue", "cue_separation")), flush=True)
        if per_seed:
            result["models"].setdefault(model, {})[length] = {"per_seed": per_seed, "median": medians(per_seed), **({"under_way": True} if partial else {})}
    result["models"] = {model: dict(sorted(lengths.items(), key=lambda item: int(item[0]))) for model, lengths in result["models"].items()}
    result["runs_kept_from_before"] = kept
    result["wall_seconds"] = round(time.time() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}_probes.json", result, indent=1)
    write_text(args.out / f"{args.name}_probes.md", table(result))
    print(table(result))


def probed_before(path: Path, episodes: int) -> tuple[dict[tuple[str, str, int], dict], dict]:
    """The runs earlier calls probed, by (model, length, seed), and their NAME_probes.json
    itself (none, {}, where there is no such file); ValueError for a file probed with another
    --episodes."""
    before = read_record(path)
    if before is None:
        return {}, {}
    if before.get("episodes") != episodes:
        raise ValueError(f"{path} was probed with --episodes {before.get('episodes')}, not {episodes}; "
                         "give the same, or delete it to probe every run again")
    runs = {(model, length, run["seed"]): run for model, cells in before["models"].items()
            for length, cell in cells.items() for run in cell["per_seed"]}
    return runs, before


def unfinished(ledger: Path, sweep: dict, runs_dir: Path) -> dict[str, dict[str, list[dict]]]:
    """{model: {length: [{"seed", "greedy_success"}, ...]}} of the runs the sweep's ledger keeps
    finished (experiments/frame/ledger.py: "MODEL/LLENGTH/seedSEED" -> its records) at lengths
    its JSON does not hold yet: a sweep writes a length into its JSON when all its runs are done,
    so a model none of whose lengths is done is in the ledger only. A memory-length run is
    finished when evaluated (its greedy success that evaluation's); a frames-to-solve run when
    trained, its greedy success its last check's, from the solve record in its folder here."""
    found: dict[str, dict[str, list[dict]]] = {}
    for folder, records in (read_record(ledger) or {}).items():
        model, length, seed = folder.split("/")
        length = length.removeprefix("L")
        if length in sweep["models"].get(model, {"lengths": {}})["lengths"]:
            continue
        if "evaluate.done.json" in records:
            success = evaluation_means(records["evaluate.done.json"])["agent"]["success"]
        elif "train.done.json" in records and (solve := read_record(runs_dir / folder / "solve.json")):
            success = greedy_success(solve)
        else:
            continue
        found.setdefault(model, {}).setdefault(length, []).append({"seed": int(seed.removeprefix("seed")), "greedy_success": success})
    for lengths in found.values():
        for runs in lengths.values():
            runs.sort(key=lambda run: run["seed"])
    return found


def greedy_success(run: dict) -> float:
    """A run's greedy success: memory_length's evaluation, or for a frames-to-solve run its last
    check's (the confirmation where the run solved)."""
    if "greedy_success" in run:
        return run["greedy_success"]
    last = run["checks"][-1]
    return last.get("confirmation", last["score"])


def probe_run(run_dir: str, episodes: int) -> dict:
    """{"fresh": ..., "trained": ...}: KEPT of probe() for a fresh policy of the run's config and
    seed and for its final policy, on `episodes` episodes of its length."""
    run, fresh = trained_and_fresh(run_dir, ("memory_length",))
    walk = walk_to_query(run.config.env_options, episodes)
    numbers = {"fresh": probe(fresh, walk), "trained": probe(run.policy, walk)}
    return {name: {key: float(value[key]) for key in KEPT if key in value} for name, value in numbers.items()}


def medians(per_seed: list[dict]) -> dict:
    """Each policy's numbers, median over seeds."""
    return {policy: {key: float(np.median([run[policy][key] for run in per_seed])) for key in per_seed[0][policy]} for policy in ("fresh", "trained")}


def table(result: dict) -> str:
    """A row per model and length: seeds solved, then each number fresh -> trained (median over
    seeds; the gradient's range over seeds too)."""
    lines = [f"Probes of the memory length runs of {result['source']} ({result['episodes']} episodes walked to the query per policy; "
             "fresh: a policy of the run's config and seed before any update; trained: the run's final policy). Medians over seeds.\n"]
    rows = []
    for model, lengths in result["models"].items():
        for length, cell in lengths.items():
            per_seed, median = cell["per_seed"], cell["median"]
            solved = sum(run["greedy_success"] >= 0.95 for run in per_seed)
            def gradient(policy: str) -> str:
                values = [run[policy]["gradient_to_cue"] for run in per_seed]
                return f"{median[policy]['gradient_to_cue']:.1e} ({min(values):.0e} .. {max(values):.0e})"

            retention = " -> ".join(f"{median[p]['retention']:.3f}" for p in ("fresh", "trained")) if "retention" in median["fresh"] else "-"
            under_way = " (length under way)" if cell.get("under_way") else ""
            rows.append([model, length, f"{solved} of {len(per_seed)}{under_way}", gradient("fresh"), gradient("trained"),
                         " -> ".join(f"{median[p]['cue_separation']:.2f}" for p in ("fresh", "trained")), retention])
    return "\n".join(lines) + "\n" + markdown_table(
        ["model", "L", "solved", "gradient to cue, fresh (range)", "trained (range)", "cue separation at the query, fresh -> trained", "retention per step, fresh -> trained"], rows)


if __name__ == "__main__":
    main()
