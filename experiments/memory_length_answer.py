"""The memory-length curve's answer in one table and one figure: how far back each core carries one
bit on bsuite's recall task, with A2C and with PPO, and what was measured where each one stops.

    python -m experiments.memory_length_answer          # from the JSON in assets/memory_length/, in seconds

Trains and probes nothing. It reads what the sweeps wrote (experiments/memory_length.py,
--env memory_length, 10,000 episodes a run as bsuite's memory_len runs them, then our cap of 3M
frames from L = 512), for each learner:

- its sweep of L = 1 to 256 and, for A2C, the sweep beyond (L = 512 and 1,024, for the cores that
  solved 256), with the runs of a length still under way read from that sweep's ledger;
- the longer runs at a first failing length (experiments/cliff_budget.py, or a sweep run with
  more frames): whether more frames move the cliff;
- the probes (experiments/recall_cliff.py) at that length: the fresh and the trained policy's
  gradient to the bit, and the Feedback memory's retention per step.

A core's reach is the longest length most of its seeds solve, every shorter one solved by most
too (memory_length.reach); its score, the share of the 9 lengths 1 to 256 that most seeds solve
(memory_length.score), the same 9 for both learners. Its cliff is the first length most seeds do
not solve. Writes OUT/memory_length_answer.json, .md and .png (A2C and PPO side by side:
greedy success against length, and the share of runs solved with its Wilson interval; Ni et
al.'s L = 1,500 marked).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from agents.plot_curves import save_figure
from durable.records import read_record, write_json, write_text
from experiments.frame.flags import results_folder
from experiments.frame.jobs import ROOT
from experiments.frame.stats import solved_interval
from experiments.frame.tables import markdown_table
from experiments.memory_length import FLOOR, NI_TRANSFORMER_SOLVES, reach, score, solved_by_most
from experiments.recall_cliff import unfinished

NAME = "memory_length_answer"
SWEPT = 9  # L = 1, 2, 4, ..., 256: the lengths both learners' sweeps ran, over which the score is taken
# Each learner's inputs, by file stem in OUT: the sweeps (the first is the one of L = 1 to 256), the
# longer runs at a cliff, the probes.
SOURCES = {
    "a2c": {"sweeps": ["memory_length_recall", "memory_length_recall_beyond"],
            "longer": ["memory_length_recall_budget", "memory_length_recall_L64_4x", "memory_length_recall_beyond_budget"],
            "probes": ["memory_length_recall_probes", "memory_length_recall_beyond_probes"]},
    "ppo": {"sweeps": ["memory_length_recall_ppo"], "longer": ["memory_length_recall_ppo_budget"], "probes": ["memory_length_recall_ppo_probes"]},
}


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=results_folder("memory_length"),
                        help="where the sweeps' JSON is and the results go (default: assets/memory_length/)")
    return parser


def read(out: Path, stem: str) -> dict:
    """OUT/STEM.json; FileNotFoundError naming the command that writes it."""
    record = read_record(out / f"{stem}.json")
    if record is None:
        raise FileNotFoundError(f"{out / stem}.json is missing: its command is on docs/reproducing.md (or give --out where it is)")
    return record


def curve(out: Path, sweeps: dict[str, dict]) -> dict[str, dict[str, dict]]:
    """{model: {length: cell}} over the learner's sweeps (stem -> its JSON), shortest length first. A length a sweep
    finished is its JSON's cell (greedy IQM and interval, solved of runs, per seed); one under way,
    only in its ledger, is {"per_seed": [...], "under_way": True}."""
    cells: dict[str, dict[str, dict]] = {}
    for stem, sweep in sweeps.items():
        for model, record in sweep["models"].items():
            cells.setdefault(model, {}).update(record["lengths"])
        for model, lengths in unfinished(out / f"{stem}_runs.json", sweep, ROOT / "runs" / "experiments" / stem).items():
            for length, runs in lengths.items():
                cells.setdefault(model, {})[length] = {"per_seed": runs, "under_way": True}
    return {model: dict(sorted(lengths.items(), key=lambda item: int(item[0]))) for model, lengths in cells.items()}


def stopped_lengths(sweeps: dict[str, dict]) -> dict[str, list[str]]:
    """{model: the lengths its sweeps were given and did not run, the stop rule (--stop-after) having
    ended the model's sweep at a shorter one}: not run because it stopped, unlike a length beyond
    every sweep the model was in, which no sweep was asked to run."""
    skipped: dict[str, set[str]] = {}
    for sweep in sweeps.values():
        for model, last in (sweep.get("stopped") or {}).items():
            skipped.setdefault(model, set()).update(str(length) for length in sweep.get("lengths", []) if length > last)
    return {model: sorted(lengths, key=int) for model, lengths in skipped.items()}


def longer_runs(out: Path, stems: list[str], swept_frames: dict[str, int]) -> dict[tuple[str, str], dict]:
    """{(model, length): {"frames", "scale", "solved", "greedy_per_seed"}} of the runs with more
    frames at a length: cliff_budget's records ("length" per model) or a sweep's (lengths per model)."""
    found = {}
    for stem in stems:
        record = read(out, stem)
        for model, entry in record["models"].items():
            if "length" in entry:  # experiments/cliff_budget.py
                cells = {str(entry["length"]): (entry, entry["frames"])}
            else:  # experiments/memory_length.py with --frames
                cells = {length: (cell, record["frames"][length]) for length, cell in entry["lengths"].items()}
            for length, (cell, frames) in cells.items():
                found[model, length] = {"frames": frames, "scale": round(frames / swept_frames[length], 2), "solved": cell["solved"],
                                        "greedy_per_seed": [run["greedy_success"] for run in cell["per_seed"]]}
    return found


def probes_at(out: Path, stems: list[str]) -> dict[tuple[str, str], dict]:
    """{(model, length): the probes' medians over seeds, fresh and trained, and the seeds probed}."""
    return {(model, length): {"seeds": len(cell["per_seed"]), **cell["median"]}
            for stem in stems for model, lengths in read(out, stem)["models"].items() for length, cell in lengths.items()}


def solved_runs(greedy: list[float], solved_at: float, under_way: bool) -> dict:
    """A length's runs solved (greedy success >= solved_at) of its runs; for a finished length
    with the Wilson 95% interval of the probability that a run solves it, for one under way
    only the count so far (its seeds are not all in)."""
    if under_way:
        return {"solved": sum(g >= solved_at for g in greedy), "runs": len(greedy), "under_way": True}
    return solved_interval(np.array(greedy), solved_at)


def answer(out: Path, inputs: dict[str, dict[str, list[str]]] = SOURCES) -> dict:
    """Every learner's models (from `inputs`, shaped as SOURCES): solved runs per length, reach,
    score, and the cliff with what was measured there."""
    learners = {}
    for learner, sources in inputs.items():
        sweeps = {stem: read(out, stem) for stem in sources["sweeps"]}
        first = sweeps[sources["sweeps"][0]]
        frames = {length: frames for sweep in sweeps.values() for length, frames in sweep["frames"].items()}
        longer, probes = longer_runs(out, sources["longer"], frames), probes_at(out, sources["probes"])
        models, stopped = {}, stopped_lengths(sweeps)
        for model, cells in curve(out, sweeps).items():
            done = {length: cell for length, cell in cells.items() if not cell.get("under_way")}
            cliff = next((length for length, cell in done.items() if not solved_by_most(cell)), None)
            models[model] = {
                "solved": {length: solved_runs([run["greedy_success"] for run in cell["per_seed"]], first["solved_at"], cell.get("under_way", False))
                           for length, cell in cells.items()},
                "greedy": {length: cell.get("greedy") or {"per_seed": [run["greedy_success"] for run in cell["per_seed"]]} for length, cell in cells.items()},
                "stopped": [length for length in stopped.get(model, []) if length not in cells],
                "reaches": reach({"lengths": done}),
                "score": round(score({"lengths": {length: cell for length, cell in done.items() if int(length) <= 256}}, SWEPT), 2),
                "cliff": None if cliff is None or model == FLOOR else {
                    "length": int(cliff), "solved": done[cliff]["solved"],
                    "longer": longer.get((model, cliff)), "probes": probes.get((model, cliff))},
            }
        learners[learner] = {"sources": sources, "solved_at": first["solved_at"], "models": models}
    return {"command": "python -m experiments.memory_length_answer", "learners": learners}


def solved_text(cell: dict | None, stopped: bool = False) -> str:
    """"3" (runs solved), "0 of 1 so far" (a length under way), "stop" (not run: the stop rule ended
    the sweep before it) or "-" (not run: beyond the lengths the model's sweeps ran)."""
    if cell is None:
        return "stop" if stopped else "-"
    return f"{cell['solved']} of {cell['runs']} so far" if cell.get("under_way") else str(cell["solved"])


def cliff_text(cliff: dict | None) -> list[str]:
    """The cliff's columns: L and runs solved; the longer runs; the probes (medians, fresh -> trained)."""
    if cliff is None:
        return ["-", "-", "-", "-"]
    longer, probes = cliff["longer"], cliff["probes"]
    more = f"{longer['scale']:g}x: {longer['solved']['solved']} of {longer['solved']['runs']}" if longer else "not run"
    if not probes:
        return [f"{cliff['length']} ({cliff['solved']['solved']} of {cliff['solved']['runs']})", more, "not probed", "-"]
    gradient = f"{probes['fresh']['gradient_to_cue']:.0e} -> {probes['trained']['gradient_to_cue']:.0e}"
    retention = f"{probes['fresh']['retention']:.2f} -> {probes['trained']['retention']:.2f}" if "retention" in probes["fresh"] else "-"
    return [f"{cliff['length']} ({cliff['solved']['solved']} of {cliff['solved']['runs']})", more, gradient, retention]


def seeds_per_length(*learners: dict) -> str:
    """"5 seeds at L = 1 to 128, 3 at 256 to 1024": the runs of each finished length (the most any
    model has there), consecutive lengths with the same count together."""
    runs: dict[int, int] = {}
    for learner in learners:
        for model in learner.values():
            for length, cell in model["solved"].items():
                if not cell.get("under_way"):
                    runs[int(length)] = max(runs.get(int(length), 0), cell["runs"])
    groups: list[list[int]] = []  # [count, first length, last length]
    for length in sorted(runs):
        if groups and groups[-1][0] == runs[length]:
            groups[-1][2] = length
        else:
            groups.append([runs[length], length, length])
    return ", ".join(f"{count} seeds" + (" at L = " if i == 0 else " at ") + (f"{first}" if first == last else f"{first} to {last}")
                     for i, (count, first, last) in enumerate(groups))


def table(result: dict) -> str:
    """The reach table (both learners side by side), then the cliff table."""
    a2c, ppo = (result["learners"][learner]["models"] for learner in ("a2c", "ppo"))
    lengths = sorted({int(length) for learner in (a2c, ppo) for model in learner.values() for length in model["solved"]})
    reach_rows = []
    for model in a2c:
        row = [model]
        for learner in (a2c, ppo):
            entry = learner.get(model)
            row += [entry["reaches"] or "none", f"{entry['score']:.2f}"] if entry else ["-", "-"]
        reach_rows.append(row + [" / ".join(solved_text(learner.get(model, {"solved": {}})["solved"].get(str(length)),
                                                        str(length) in learner.get(model, {}).get("stopped", []))
                                            for learner in (a2c, ppo)) for length in lengths])
    reaches = markdown_table(
        ["model", "A2C reaches", "A2C score", "PPO reaches", "PPO score", *(f"L {length}: A2C / PPO" for length in lengths)], reach_rows,
        "How far back each core carries one bit on bsuite's recall task: 10,000 episodes a run, as bsuite's memory_len runs them, "
        "to L = 256; from L = 512 our cap of 3M frames (5,848 episodes at 512, 2,927 at 1,024). "
        "Reaches: the longest length most seeds solve (greedy success >= 0.95), every shorter one solved by most too; score: the share of "
        f"the {SWEPT} lengths 1 to 256 most seeds solve. Runs solved at each length, A2C / PPO, of {seeds_per_length(a2c, ppo)} "
        "(stop: not run, the model's sweep having stopped after two lengths in a row no seed solves; -: not run, beyond the lengths "
        "its sweeps ran: PPO's end at 256, so a PPO reach of 256 is the longest length run, not a cliff).")
    cliff_rows = [[model, learner.upper(), *cliff_text(entry["cliff"])] for learner in ("a2c", "ppo")
                  for model, entry in result["learners"][learner]["models"].items() if entry["cliff"]]
    cliffs = markdown_table(
        ["model", "learner", "cliff: L (runs solved)", "more frames there: runs solved", "gradient to the bit, fresh -> trained",
         "Feedback memory's retention a step, fresh -> trained"], cliff_rows,
        "Each core's first length most seeds do not solve, and what was measured there: the same runs with more frames "
        "(experiments/cliff_budget.py; 3 seeds), and the probes (experiments/recall_cliff.py, medians over the sweep's seeds): the "
        "gradient of the right answer at the query with respect to the input at the bit's step, over that at the query's step "
        "(0: no path back that far), fresh policy and trained; for Feedback, the share of the bit's part of the memory kept a step.")
    return reaches + "\n" + cliffs


def draw(result: dict, out: Path) -> None:
    """Two columns, A2C and PPO, one colour per model in all four panels, lengths on a log axis.
    Top: greedy success (IQM and its 95% bootstrap interval over seeds; a length under way as its
    seeds' mean, hollow). Bottom: the share of runs that solve each finished length and the Wilson
    95% interval of the probability that a run does, the number the reach is read from. Ni et
    al.'s L = 1,500 marked in each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(2, 2, figsize=(12.5, 7.6), dpi=100, sharey=True, sharex=True)
    names = list(result["learners"]["a2c"]["models"])
    colours = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(names)}
    ticks = sorted({int(length) for learner in result["learners"].values() for model in learner["models"].values() for length in model["greedy"]})
    for column, (learner, record) in enumerate(result["learners"].items()):
        success, solved = panels[0, column], panels[1, column]
        for offset, (name, model) in zip(np.linspace(-0.08, 0.08, len(record["models"])), record["models"].items()):
            done = [(int(length), cell) for length, cell in model["greedy"].items() if "iqm" in cell]
            x = np.array([length for length, _ in done], dtype=float) * 2**offset  # side by side
            iqm = np.array([cell["iqm"] for _, cell in done])
            error = [iqm - [cell["ci_low"] for _, cell in done], [cell["ci_high"] for _, cell in done] - iqm]
            success.errorbar(x, iqm, yerr=error, marker="o", markersize=4, capsize=2, linewidth=1.4, color=colours[name], label=name)
            for length, cell in model["greedy"].items():
                if "per_seed" in cell:  # under way: seeds so far
                    success.plot([int(length) * 2**offset], [np.mean(cell["per_seed"])], marker="o", markerfacecolor="none", color=colours[name])
            finished = [(int(length), cell) for length, cell in model["solved"].items() if "ci_low" in cell]
            share = np.array([cell["solved"] / cell["runs"] for _, cell in finished])
            interval = [share - [cell["ci_low"] for _, cell in finished], [cell["ci_high"] for _, cell in finished] - share]
            solved.errorbar(np.array([length for length, _ in finished], dtype=float) * 2**offset, share, yerr=interval,
                            marker="o", markersize=4, capsize=2, linewidth=1.4, color=colours[name])
        for axes in (success, solved):
            axes.plot([NI_TRANSFORMER_SOLVES], [1.0], marker="*", markersize=12, color="black", linestyle="none",
                      label=f"Ni et al.: transformer, DQN, the passive T-maze to {NI_TRANSFORMER_SOLVES:,}")
            axes.annotate(f"{NI_TRANSFORMER_SOLVES:,}", (NI_TRANSFORMER_SOLVES, 1.0), textcoords="offset points", xytext=(0, -14), ha="center", fontsize=7)
            axes.set_xscale("log", base=2)
            axes.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
            axes.minorticks_off()
            axes.set_ylim(-0.02, 1.05)
            axes.grid(color="#e0e0e0", linewidth=0.8)
            axes.spines[["top", "right"]].set_visible(False)
        success.axhline(0.5, color="#999999", linestyle=":", linewidth=1)
        success.set_title(f"{learner.upper()}: recall, 10,000 episodes a run; 3M frames from 512", loc="left", fontsize=9)
        solved.set_xlabel("memory length L (steps between the bit and the question)")
    if any("per_seed" in cell for learner in result["learners"].values() for model in learner["models"].values() for cell in model["greedy"].values()):
        panels[0, 1].plot([], [], marker="o", markerfacecolor="none", color="black", linestyle="none", label="hollow: the seeds so far of a length under way")
    panels[0, 0].set_ylabel("greedy success rate (IQM, 95% bootstrap)")
    panels[1, 0].set_ylabel("runs solved (share, Wilson 95%)")
    save_figure(figure, panels[0, 1], out, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    result = answer(args.out)
    write_json(args.out / f"{NAME}.json", result, indent=1)
    write_text(args.out / f"{NAME}.md", table(result))
    draw(result, args.out / f"{NAME}.png")
    print(table(result))


if __name__ == "__main__":
    main()
