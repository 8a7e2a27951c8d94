"""What carrying one bit further costs each core: the frames-to-solve curves, their slopes, and
whether a solved memory holds at twice its length.

    python -m experiments.frames_to_solve_answer        # from assets/memory_length/frames_to_solve*.json, in minutes (the bootstrap)

Trains nothing. For each learner whose sweep exists (experiments/frames_to_solve.py: A2C's
frames_to_solve.json, PPO's frames_to_solve_ppo.json), each model gets:

- its longest length solved by most of its seeds, and the median frames they took there;
- the slope of log(frames to solve) against log(L), with a 95% interval: how the cost of
  carrying one bit grows with distance (1: in proportion to L, as the frames of a fixed number of
  episodes do; 2: with the square). A censored run (unsolved at its cap) enters as what it is, a
  lower bound: the fit is a censored (Tobit) regression, log10 frames = a + b log10 L + e with
  e ~ Normal(0, s), whose likelihood takes the density of each solved run and the probability of
  exceeding the cap for each censored one; never "solved at the cap". It is fitted over the
  lengths up to the longest one at which any seed solved (past it every run is censored and
  says only where the curve stops), and needs two such lengths. s is at least 0.02 (the checks
  are about 10% apart, so frames to solve are read to about that). The interval is the 2.5 and
  97.5 percentiles of the slopes refitted to 1,000 resamples of the runs within each length;
- whether its solved runs hold at 2L: of the solved runs at its longest solved length, how many
  keep greedy success >= 0.95 at twice the length (experiments/past_length.py);
- where its curve stops, why: at the first length most seeds did not solve, the probes of its
  runs there (experiments/recall_cliff.py --name SWEEP, whose SWEEP_probes.json this reads where
  it exists), medians over seeds, fresh -> trained: the gradient to the bit (fading or growing
  as it trained) and, for the Feedback cores, the memory's retention a step.

Writes OUT/frames_to_solve_answer.json, .md and .png (frames to solve against L, log-log, a
panel per learner: every run a point, censored ones as open triangles at their cap, the
medians joined where most runs solved). Each row keeps the runs it was computed from (`runs`:
{L: [[frames, solved], ...]}), and a row whose runs are those of the answer already written takes
that answer's slope instead of refitting its 1,000 resamples (the bootstrap is seeded, so the refit
would give the same numbers), unless that answer was fitted with other resamples or least spread;
`--refit` refits every row, as after a change to the fit itself.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import optimize, special
from threadpoolctl import threadpool_limits

from agents.plot_curves import save_figure
from durable.records import read_record, write_json, write_text
from experiments.frame.flags import results_folder
from experiments.frame.tables import markdown_table
from experiments.memory_length_answer import probes_at

NAME = "frames_to_solve_answer"
SWEEPS = {"a2c": "frames_to_solve", "ppo": "frames_to_solve_ppo"}  # the probes of each: STEM_probes.json
HOLDS = 0.95  # greedy success at 2L that counts as holding
LEAST_SPREAD = 0.02  # log10 units: the checks' resolution, about 10%
RESAMPLES = 1_000


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=results_folder("memory_length"),
                        help="where the sweeps' JSON is and the results go (default: assets/memory_length/)")
    parser.add_argument("--refit", action="store_true",
                        help="refit every row's slope, even where its runs are those of the answer already written")
    return parser


def runs_by_length(model: dict) -> dict[int, list[tuple[float, bool]]]:
    """{L: [(frames, solved)]}: a solved run's frames to solve, a censored one's cap."""
    return {int(length): [(run["frames_to_solve"] if run["solved"] else run["censored_at"], run["solved"]) for run in cell["per_seed"]]
            for length, cell in sorted(model["lengths"].items(), key=lambda item: int(item[0]))}


def censored_fit(log_length: np.ndarray, log_frames: np.ndarray, solved: np.ndarray,
                 start: np.ndarray | None = None) -> np.ndarray:
    """(intercept, slope, log of the spread above LEAST_SPREAD) of the censored regression in the
    module docstring (log10 units), by L-BFGS on the exact gradient of the negative log-likelihood;
    `start` (a fit of the same runs, say) where the search begins."""

    def negative_log_likelihood(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, b, log_spread = theta
        s = LEAST_SPREAD + np.exp(log_spread)
        z = (log_frames - a - b * log_length) / s
        zs, zc, xs, xc = z[solved], z[~solved], log_length[solved], log_length[~solved]
        log_survival = special.log_ndtr(-zc)  # log P(Z > z)
        hazard = np.exp(-zc**2 / 2 - 0.5 * np.log(2 * np.pi) - log_survival)  # d/dz of -log P(Z > z)
        value = -(np.sum(-zs**2 / 2 - np.log(s)) + np.sum(log_survival)) + len(zs) * 0.5 * np.log(2 * np.pi)
        d_a = -(np.sum(zs) + np.sum(hazard)) / s
        d_b = -(np.sum(zs * xs) + np.sum(hazard * xc)) / s
        d_s = -(np.sum(zs**2 - 1) + np.sum(hazard * zc)) / s
        return float(value), np.array([d_a, d_b, d_s * np.exp(log_spread)])

    if start is None:
        slope0, intercept0 = np.polyfit(log_length, log_frames, 1) if np.ptp(log_length) > 0 else (0.0, log_frames.mean())
        start = np.array([intercept0, slope0, np.log(0.1)])
    return optimize.minimize(negative_log_likelihood, start, jac=True, method="L-BFGS-B").x


def slope(runs: dict[int, list[tuple[float, bool]]], seed: int = 0) -> dict | None:
    """The slope over the lengths up to the longest one any seed solved, its 95% interval, the
    lengths used; None with fewer than two such lengths."""
    solved_lengths = [length for length, cell in runs.items() if any(done for _, done in cell)]
    if len(solved_lengths) < 2:
        return None
    used = {length: cell for length, cell in runs.items() if length <= max(solved_lengths)}

    def fit(cells: dict[int, list[tuple[float, bool]]], start: np.ndarray | None = None) -> np.ndarray:
        points = [(np.log10(length), np.log10(frames), done) for length, cell in cells.items() for frames, done in cell]
        x, y, done = (np.array(column) for column in zip(*points))
        return censored_fit(x, y, done.astype(bool), start)

    whole = fit(used)
    generator = np.random.default_rng(seed)
    resampled = []
    for _ in range(RESAMPLES):
        cells = {length: [cell[i] for i in generator.integers(0, len(cell), len(cell))] for length, cell in used.items()}
        if sum(any(done for _, done in cell) for cell in cells.values()) >= 2:  # a resample with one solved length has no slope
            resampled.append(fit(cells, whole)[1])
    low, high = np.percentile(resampled, [2.5, 97.5])
    return {"slope": round(float(whole[1]), 3), "ci_low": round(float(low), 3), "ci_high": round(float(high), 3),
            "lengths": sorted(used), "resamples": len(resampled)}


def median_frames(cell: list[tuple[float, bool]]) -> float | None:
    """The median frames to solve where most runs solved (censored runs counted as above every
    solved one), else None."""
    if 2 * sum(done for _, done in cell) <= len(cell):
        return None
    ordered = sorted(frames if done else np.inf for frames, done in cell)
    return float(np.median(ordered))


def answer(model: dict, probes: dict[str, dict] | None = None, before: dict | None = None) -> dict:
    """One model's row: its longest length solved by most seeds (every shorter length run too),
    the median frames there, the slope, whether its solved runs hold at 2L, the probes at its
    first unsolved length where `probes` ({length: medians}) has them, and the runs it was made
    from; the slope of `before` (the same row as last written) where its runs are these."""
    runs = runs_by_length(model)
    runs_kept = json.loads(json.dumps({str(length): cell for length, cell in runs.items()}))  # as the JSON holds them
    longest, frames = None, None
    for length, cell in runs.items():
        median = median_frames(cell)
        if median is None:
            break
        longest, frames = length, median
    holds = None
    if longest is not None:
        tried = [run["success_at_length"] for run in model["lengths"][str(longest)]["per_seed"] if run["solved"] and run["success_at_length"]]
        holds = {"runs": len(tried), "hold": sum(success[str(2 * longest)] >= HOLDS for success in tried)}
    stops = [length for length, cell in runs.items() if longest is None or length > longest]
    first_unsolved = stops[0] if stops else None
    fit = before["slope"] if before and before.get("runs") == runs_kept else slope(runs)
    return {"longest_solved": longest, "median_frames": frames, "slope": fit, "holds_at_2L": holds,
            "first_unsolved": first_unsolved, "probes_there": (probes or {}).get(str(first_unsolved)), "lengths_run": list(runs),
            "runs": runs_kept}


def draw(sweeps: dict[str, dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(1, len(sweeps), figsize=(6.4 * len(sweeps), 4.6), dpi=100, squeeze=False)
    for axes, (algo, sweep) in zip(panels[0], sweeps.items()):
        for index, (name, model) in enumerate(sweep["models"].items()):
            color = plt.cm.tab20(index % 20)
            runs = runs_by_length(model)
            for length, cell in runs.items():
                for frames, done in cell:
                    axes.plot(length, frames, marker="o" if done else "^", markersize=3.5 if done else 5, color=color,
                              markerfacecolor=color if done else "none", linestyle="none", alpha=0.7)
            medians = [(length, median_frames(cell)) for length, cell in runs.items()]
            joined = [(length, frames) for length, frames in medians if frames is not None]
            axes.plot(*(zip(*joined) if joined else ([], [])), color=color, linewidth=1.6, label=name)  # no line: never solved by most
        lengths = sorted({int(length) for model in sweep["models"].values() for length in model["lengths"]})
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xticks(lengths, [str(length) for length in lengths])
        axes.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        axes.set_xlabel("memory length L (steps between the bit and the question)")
        axes.set_ylabel("env frames to solve (open triangle: unsolved at its cap)")
        axes.set_title(f"recall task, {algo.upper()}: frames to solve", loc="left", fontsize=11)
        save_figure(figure, axes, out, fontsize=7, loc="upper left")


def probes_text(row: dict) -> str:
    """"1e-03 -> 4e-07; 0.88 -> 0.80": at the first unsolved length, the gradient to the bit and
    (Feedback cores) the retention a step, fresh -> trained; "not probed"; "-" with no such length."""
    probes = row["probes_there"]
    if row["first_unsolved"] is None:
        return "-"
    if probes is None:
        return "not probed"
    fresh, trained = probes["fresh"], probes["trained"]
    text = f"{fresh['gradient_to_cue']:.0e} -> {trained['gradient_to_cue']:.0e}"
    return text + (f"; {fresh['retention']:.2f} -> {trained['retention']:.2f}" if "retention" in fresh else "")


def table(answers: dict[str, dict[str, dict]]) -> str:
    rows = []
    for algo, models in answers.items():
        for name, row in models.items():
            fit = row["slope"]
            holds = row["holds_at_2L"]
            rows.append([algo.upper(), name, row["longest_solved"] or "none",
                         f"{row['median_frames']:,.0f}" if row["median_frames"] else "-",
                         f"{fit['slope']:.2f} [{fit['ci_low']:.2f}, {fit['ci_high']:.2f}] (L {fit['lengths'][0]}-{fit['lengths'][-1]})" if fit else "-",
                         f"{holds['hold']} of {holds['runs']}" if holds else "-", row["first_unsolved"] or "-", probes_text(row)])
    caption = ("Per core and learner: the longest L that most seeds solve (every shorter one too) and their median frames there; "
               "the slope of log frames against log L with its 95% bootstrap interval (a censored regression: unsolved runs as "
               "lower bounds; over the lengths it names); the solved runs at the longest L that keep greedy success >= 0.95 at 2L; "
               "the first length most seeds did not solve, and there the probes of its runs (experiments/recall_cliff.py; medians "
               "over seeds, fresh -> trained): the gradient to the bit, and for the Feedback cores the memory's retention a step.")
    return markdown_table(["learner", "model", "longest solved", "median frames there", "slope [95% CI]", "hold at 2L", "first unsolved",
                           "there: gradient to the bit; retention"],
                          rows, caption)


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    sweeps = {algo: read_record(args.out / f"{stem}.json") for algo, stem in SWEEPS.items()}
    sweeps = {algo: sweep for algo, sweep in sweeps.items() if isinstance(sweep, dict)}
    if not sweeps:
        raise SystemExit(f"no sweep in {args.out}: run python -m experiments.frames_to_solve first")
    probes = {algo: probes_at(args.out, [f"{SWEEPS[algo]}_probes"]) if (args.out / f"{SWEEPS[algo]}_probes.json").exists() else {}
              for algo in sweeps}
    written = read_record(args.out / f"{NAME}.json")
    same_fit = isinstance(written, dict) and (written.get("resamples"), written.get("least_spread_log10")) == (RESAMPLES, LEAST_SPREAD)
    before = written["models"] if same_fit and not args.refit else {}
    with threadpool_limits(limits=1, user_api="blas"):  # 3-parameter fits: a second BLAS thread only waits (pyproject.toml)
        answers = {algo: {name: answer(model, {length: cell for (probed, length), cell in probes[algo].items() if probed == name},
                                       before.get(algo, {}).get(name))
                          for name, model in sweep["models"].items()} for algo, sweep in sweeps.items()}
    summary = {"sources": {algo: f"{SWEEPS[algo]}.json" for algo in sweeps},
               "probes": {algo: f"{SWEEPS[algo]}_probes.json" for algo in sweeps if probes[algo]}, "complete": {algo: sweep["complete"] for algo, sweep in sweeps.items()},
               "holds_at": HOLDS, "least_spread_log10": LEAST_SPREAD, "resamples": RESAMPLES, "models": answers}
    write_json(args.out / f"{NAME}.json", summary, indent=1)
    write_text(args.out / f"{NAME}.md", table(answers))
    draw(sweeps, args.out / f"{NAME}.png")
    print(table(answers))


if __name__ == "__main__":
    main()
