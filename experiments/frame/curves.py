"""Learning curves over seeds: TensorBoard scalars put on a common frame grid, and their figure.

Each run logs `charts/episodic_return` whenever episodes end, at its own frame counts. To
aggregate seeds, every run's points are averaged within the same bins of frames (`grid`), so
each seed gives one value per bin; the figure shows the IQM over seeds per bin and its bootstrap
95% interval as a band (experiments/frame/stats.py), with the random and oracle returns as lines.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agents.plot_curves import read_scalars, save_figure
from experiments.frame.stats import iqm_interval


def binned_curve(run_dir: Path, tag: str, frames: int, bins: int) -> np.ndarray:
    """(bins,) mean of `tag` over the points logged in each of `bins` equal spans of
    [0, frames]; a span without points takes the previous span's value (NaN before the first,
    and everywhere for a run that logged none: no episode ended)."""
    try:
        steps, values = read_scalars(str(run_dir), tag)
    except ValueError:
        if not Path(run_dir).is_dir():
            raise
        return np.full(bins, np.nan)
    index = np.minimum(steps * bins // frames, bins - 1)
    sums = np.bincount(index, weights=values, minlength=bins)[:bins]
    counts = np.bincount(index, minlength=bins)[:bins]
    curve = np.full(bins, np.nan)
    last = np.nan
    for b in range(bins):
        last = sums[b] / counts[b] if counts[b] else last
        curve[b] = last
    return curve


def draw_curves(
    curves: dict[str, np.ndarray],  # {core: (seeds, bins)}
    frames: int,
    lines: dict[str, float],  # {"random": return, "oracle": return}
    title: str,
    ylabel: str,
    out: Path,
    xlabel: str = "env frames",
) -> None:
    """IQM over seeds and its 95% bootstrap band per core, baselines dashed; a PNG at `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for name, matrix in curves.items():
        bins = matrix.shape[1]
        x = (np.arange(bins) + 0.5) * frames / bins
        keep = ~np.isnan(matrix).any(axis=0)  # bins every seed has reached
        if keep.sum() == 0:
            continue
        stats = iqm_interval({name: matrix[:, keep]})[name]
        (line,) = axes.plot(x[keep], stats["iqm"], linewidth=2.0, label=f"{name} ({matrix.shape[0]} seeds)")
        axes.fill_between(x[keep], stats["ci_low"], stats["ci_high"], color=line.get_color(), alpha=0.2, linewidth=0)
    for (name, value), style in zip(lines.items(), (":", "--")):
        axes.axhline(value, color="#555555", linestyle=style, linewidth=1.2, label=f"{name} ({value:.2f})")
    axes.set_title(title, loc="left", fontsize=11)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.xaxis.set_major_formatter(EngFormatter(sep=""))
    save_figure(figure, axes, out, fontsize=8, loc="best")


def training_seconds(run_dir: Path) -> float:
    """Seconds spent in updates (acting and learning), from the frames per second logged at every
    update: setup, evaluation and the pauses of an interrupted and resumed run are not counted."""
    steps, frames_per_second = read_scalars(str(run_dir), "charts/SPS")
    frames = np.diff(steps, prepend=0)
    return float(np.sum(frames / frames_per_second))
