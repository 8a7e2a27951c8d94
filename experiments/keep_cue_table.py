"""The memory-length page's table of the Feedback memory's ways of keeping the cue, from their JSON.

    python -m experiments.keep_cue_table        # reads assets/memory_length/, writes keep_cue_table.md and .json

One row per design (the paper's model first), one column per question of the design's issue,
every cell read from a JSON this module names in the cell's source list, "not run" where there
is none yet:

- retention a step and the gradient to the bit, fresh (keep_cue_fresh.json, L = 64) and trained
  (NAME_probes.json of experiments/recall_cliff.py on the recall runs, at L = 64; PROBES says
  where: the paper's model's from its L = 64 runs with the clock shown until its frames-to-solve
  runs at 64 are probed);
- the recall task, A2C and PPO (frames_to_solve.py's NAME.json): per length from 32, runs
  solved of runs, and the median frames to solve over the solved runs; the longest length most
  runs solve, of every length run;
- what it costs elsewhere, each design beside the paper's model in one sitting (ELSEWHERE):
  Table 1's random walk at span 1 (experiments/memory_reach.py --cores feedback feedback-carry),
  the 8-cell corridor at span 2 (experiments/corridor_span.py), the maze and the water maze at 2M
  frames (experiments/mazes.py, the Feedback core at its defaults with and without the option), and
  the learning call of one L = 64 recall episode on the C++ step (benchmarks/feedback_compiled.py
  --recall, SPEED).

The paper's model's recall row comes from the main frames-to-solve sweep (frames_to_solve.json,
frames_to_solve_ppo.json), whose runs take the same flags but the keeping option.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from durable.records import read_record, write_json, write_text
from experiments.frame.flags import results_folder
from experiments.frame.tables import format_interval, markdown_table
from experiments.keep_cue import DESIGNS

# where each design's recall runs are: (A2C sweeps, PPO sweeps), searched in order
RECALL = {"a2c": ("frames_to_solve", "keep_cue", "keep_cue_others"), "ppo": ("frames_to_solve_ppo", "keep_cue_ppo", "keep_cue_others_ppo")}
# where each design's trained probes are, searched in order: the paper's model's in the
# frames-to-solve sweep at L = 64 (its runs there, probed), and the last, the same model at L = 64
# with 4x bsuite's frames (2.6M, the frames-to-solve cap) and the clock shown, before they were
PROBES = ("keep_cue", "keep_cue_others", "frames_to_solve", "memory_length_recall_L64_4x")
PROBED_AT = "64"
FROM = 32  # recall lengths shown: where the paper's model's reach ends (32) and on
# the costs elsewhere, per column: (folder, {design: (file stem, its row there)}, the rows of
# that file's summary, the key of the row's IQM interval), for each design run there
ELSEWHERE = {
    "table1": ("memory_reach", {"feedback-span16": ("memory_reach_carry", "feedback span 1"),
                                "feedback-span16-carry": ("memory_reach_carry", "feedback-carry span 1"),
                                "feedback-span16-tanh": ("memory_reach_tanh", "feedback-tanh span 1"),
                                "feedback-span16-kept": ("memory_reach_kept", "feedback-kept span 1")},
               lambda summary: summary["tasks"]["random_walk"]["rows"], "test"),
    "corridor": ("corridor_span", {"feedback-span16": ("corridor_span_carry", "feedback/span2"),
                                   "feedback-span16-carry": ("corridor_span_carry", "feedback-carry/span2"),
                                   "feedback-span16-tanh": ("corridor_span_tanh", "feedback-tanh/span2"),
                                   "feedback-span16-kept": ("corridor_span_kept", "feedback-kept/span2")},
                 lambda summary: summary["models"], "success"),
    "maze": ("mazes", {"feedback-span16": ("keep_cue_maze_paper", "feedback"), "feedback-span16-carry": ("keep_cue_maze_carry", "feedback"),
                       "feedback-span16-tanh": ("keep_cue_maze_tanh", "feedback"), "feedback-span16-kept": ("keep_cue_maze_kept", "feedback")},
             lambda summary: summary["envs"]["maze"]["cores"], "eval_return"),
    "water_maze": ("mazes", {"feedback-span16": ("keep_cue_water_maze_paper", "feedback"),
                             "feedback-span16-carry": ("keep_cue_water_maze_carry", "feedback"),
                             "feedback-span16-tanh": ("keep_cue_water_maze_tanh", "feedback"),
                             "feedback-span16-kept": ("keep_cue_water_maze_kept", "feedback")},
                   lambda summary: summary["envs"]["water_maze"]["cores"], "eval_return"),
}
# the learning call, per design: (the benchmark's JSON, its row); the paper's model is timed in each
SPEED = {"feedback-span16": ("feedback_compiled_carry_epyc", "paper, compiled"), "feedback-span16-carry": ("feedback_compiled_carry_epyc", "carry, compiled"),
         "feedback-span16-tanh": ("feedback_compiled_tanh_epyc", "tanh, compiled"),
         "feedback-span16-kept": ("feedback_compiled_kept_epyc", "kept, compiled")}
PAPER_SPEED_ROW = "paper, compiled"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=results_folder("memory_length"), help="where the JSON are and the table goes")
    args = parser.parse_args(argv)
    fresh = read_record(args.out / "keep_cue_fresh.json") or {"models": {}}
    rows, cells = [], {}
    for design in DESIGNS:
        cell = {"fresh": fresh["models"].get(design, {}).get(PROBED_AT, {}).get("median"), "trained": trained_probes(args.out, design)}
        for algo, names in RECALL.items():
            cell[algo] = recall(args.out, names, design)
        for column, where in ELSEWHERE.items():
            cell[column] = elsewhere(args.out.parent, where, design)
        cell["learning_call_ms"] = learning_call_ms(args.out.parent, design)
        cells[design] = cell
        rows.append([design, probe_text(cell["fresh"], cell["trained"], "retention"), probe_text(cell["fresh"], cell["trained"], "gradient_to_cue"),
                     recall_text(cell["a2c"]), recall_text(cell["ppo"]), *(interval_text(cell[column]) for column in ELSEWHERE),
                     speed_text(cell["learning_call_ms"], design)])
    sources = ", ".join(f"{design}: {cell['trained']['source']}" for design, cell in cells.items() if cell["trained"])
    elsewhere_files = sorted({f"{stem}.json" for folder, files, _, _ in ELSEWHERE.values() for stem, _ in files.values()  # those there are
                              if (args.out.parent / folder / f"{stem}.json").exists()})
    caption = (f"Fresh: median over the seeds of keep_cue_fresh.json (L = {PROBED_AT}); trained: median over the runs probed at L = {PROBED_AT} "
               f"(recall_cliff.py; {sources or 'none yet'}). Recall: runs solved of runs per length from 32 (frames to solve, median of the solved runs); "
               "reach: the longest length most runs solve, of the lengths run. Table 1: the random walk at span 1, test accuracy, "
               "IQM [95% CI]; corridor: 8 cells, span 2, greedy success, IQM [95% CI]; maze and water maze: 2M frames, the Feedback core at its "
               "defaults with and without the design's option, evaluation return (100 episodes, sampled actions), IQM [95% CI] "
               f"(from {', '.join(elsewhere_files)}); "
               "learning call: ms, one L = 64 recall episode on the C++ step, median of interleaved rounds, the paper's model's "
               f"in the same run beside it ({', '.join(sorted({f'{stem}.json' for stem, _ in SPEED.values()}))}).")
    table = markdown_table(["design", "retention a step, fresh -> trained", "gradient to the bit, fresh -> trained",
                            "recall, A2C", "recall, PPO", "Table 1", "corridor", "maze", "water maze", "learning call"], rows, caption)
    write_json(args.out / "keep_cue_table.json", cells, indent=1)
    write_text(args.out / "keep_cue_table.md", table)
    print(table)


def trained_probes(out: Path, design: str) -> dict | None:
    """The trained policies' medians at PROBED_AT, from the first probes file that has them."""
    for name in PROBES:
        probes = read_record(out / f"{name}_probes.json") or {"models": {}}
        cell = probes["models"].get(design, {}).get(PROBED_AT)
        if cell:
            return {**cell["median"]["trained"], "source": f"{name}_probes.json", "runs": len(cell["per_seed"])}
    return None


def recall(out: Path, names: tuple[str, ...], design: str) -> dict | None:
    """{length: {"solved", "runs", "median_frames", "source"}} of the first sweep that ran `design`."""
    for name in names:
        sweep = read_record(out / f"{name}.json") or {"models": {}}
        lengths = sweep["models"].get(design, {}).get("lengths")
        if lengths:
            result = {}
            for length, cell in lengths.items():
                runs = cell["per_seed"]
                solved = [run["frames_to_solve"] for run in runs if run["solved"]]
                result[length] = {"solved": len(solved), "runs": len(runs), "median_frames": float(np.median(solved)) if solved else None,
                                  "source": f"{name}.json"}
            return result
    return None


def elsewhere(assets: Path, where: tuple, design: str) -> dict | None:
    """The design's IQM interval in an experiment's JSON that ran it beside the paper's model, or
    None (not run, or a design that experiment does not run)."""
    folder, rows, rows_of, key = where
    if design not in rows:
        return None
    stem, row = rows[design]
    summary = read_record(assets / folder / f"{stem}.json")
    found = None if summary is None else rows_of(summary).get(row)
    return None if found is None else {**found[key], "seeds": len(found["per_seed"]), "source": f"{stem}.json"}


def learning_call_ms(assets: Path, design: str) -> dict | None:
    """{"ms", "paper_ms" (the paper's model's in the same run), "source"} of the design's learning
    call, or None (not timed)."""
    if design not in SPEED:
        return None
    stem, row = SPEED[design]
    speed = read_record(assets / "speed" / f"{stem}.json")
    if speed is None:
        return None
    median = speed["recall"]["median_ms"]
    return {"ms": median[row], "paper_ms": median[PAPER_SPEED_ROW], "source": f"{stem}.json"}


def speed_text(cell: dict | None, design: str) -> str:
    """"292 (paper 290)": the design's ms beside the paper's model's in the same run; the paper's own alone."""
    if cell is None:
        return "not run"
    return f"{cell['ms']:.0f}" if design == "feedback-span16" else f"{cell['ms']:.0f} (paper {cell['paper_ms']:.0f})"


def interval_text(cell: dict | None) -> str:
    return "not run" if cell is None else f"{format_interval(cell)} ({cell['seeds']} seeds)"


def probe_text(fresh: dict | None, trained: dict | None, key: str) -> str:
    def number(value):
        return "not run" if value is None else (f"{value:.3f}" if key == "retention" else f"{value:.1e}")
    return f"{number(fresh and fresh.get(key))} -> {number(trained and trained.get(key))}"


def recall_text(lengths: dict | None) -> str:
    if not lengths:
        return "not run"
    parts = []
    for length, cell in sorted(lengths.items(), key=lambda item: int(item[0])):
        if int(length) < FROM:
            continue
        frames = f" ({frames_text(cell['median_frames'])})" if cell["median_frames"] else ""
        parts.append(f"L {length}: {cell['solved']}/{cell['runs']}{frames}")
    reached = [int(length) for length, cell in lengths.items() if 2 * cell["solved"] > cell["runs"]]
    return "; ".join(parts) + f"; reach {max(reached) if reached else 'none'} ({next(iter(lengths.values()))['source']})"


def frames_text(frames: float) -> str:
    return f"{frames / 1e6:.2f}M" if frames >= 1e6 else f"{frames / 1e3:.0f}k"


if __name__ == "__main__":
    main()
