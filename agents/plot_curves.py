"""Draw one logged scalar of one or more runs as a TensorBoard-style chart (a PNG for the README).

    python -m agents.plot_curves runs/corridor-lstm-demo --tag charts/episodic_return --out assets/guide/curve.png

Scalars are read from the runs' event files with TensorBoard's `EventAccumulator`. Each run gets
one colour: its raw curve faint, its smoothed curve bold, smoothed as TensorBoard does (a
debiased exponential moving average, `--smoothing` being TensorBoard's slider). Reading and
smoothing need only tensorboard and numpy; drawing needs matplotlib, the optional `plot` extra.
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from durable.records import atomic_file

DEFAULT_TAG = "charts/episodic_return"


def read_scalars(run_dir: str, tag: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of scalar `tag` in the event files of `run_dir`, in logged order."""
    if not Path(run_dir).is_dir():
        raise ValueError(f"no run folder at {run_dir!r}")
    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0})  # 0: keep every point
    accumulator.Reload()
    tags = accumulator.Tags()["scalars"]
    if tag not in tags:
        raise ValueError(f"run {run_dir!r} has no scalar {tag!r}; it has {sorted(tags)}")
    events = accumulator.Scalars(tag)
    return np.array([e.step for e in events], dtype=np.int64), np.array([e.value for e in events], dtype=np.float64)


def smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's smoothing: an exponential moving average started at zero and divided by
    (1 - weight^n), so the first points are not pulled towards zero. Non-finite points pass
    through unchanged and a constant series stays as it is."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0 or np.all(values == values[0]):
        return values.copy()
    smoothed, last, count = np.empty_like(values), 0.0, 0
    for t, value in enumerate(values):
        if not math.isfinite(value):
            smoothed[t] = value
            continue
        last = last * weight + (1.0 - weight) * value
        count += 1
        smoothed[t] = last / (1.0 - weight**count)
    return smoothed


def draw(curves: dict[str, tuple[np.ndarray, np.ndarray]], tag: str, weight: float, out: str) -> None:
    """Write a PNG of `curves` ({run name: (steps, values)}) to `out`."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError('drawing curves needs matplotlib: pip install -e ".[plot]"') from None
    matplotlib.use("Agg")  # files only, no window
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    figure, axes = plt.subplots(figsize=(8, 4.5), dpi=100)
    colours = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    for colour, (name, (steps, values)) in zip(colours, curves.items()):
        axes.plot(steps, values, color=colour, alpha=0.25, linewidth=1.0)
        axes.plot(steps, smooth(values, weight), color=colour, linewidth=2.0, label=name)
    axes.set_title(tag, loc="left", fontsize=11)
    axes.set_xlabel("step")
    axes.set_ylabel(tag.rsplit("/", 1)[-1])
    axes.xaxis.set_major_formatter(EngFormatter(sep=""))  # 1M, 500k as TensorBoard writes them
    save_figure(figure, axes, out, loc="best")


def style_axes(axes) -> None:
    """The look every panel here shares: a light grid, no top or right spine."""
    axes.grid(color="#e0e0e0", linewidth=0.8)
    axes.spines[["top", "right"]].set_visible(False)


def save_figure(figure, axes, out: str | Path, **legend) -> None:
    """`axes` in the look every figure here shares (style_axes, a legend without a frame,
    `legend` its other options), the figure written whole to `out` (its folder made; the format
    from its suffix) and closed."""
    import matplotlib.pyplot as plt

    style_axes(axes)
    axes.legend(frameon=False, **legend)
    figure.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out) as file:
        figure.savefig(file, format=Path(out).suffix.lstrip(".") or None)
    plt.close(figure)


def smoothing_weight(text: str) -> float:
    try:
        weight = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text!r}") from None
    if not 0.0 <= weight < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {weight}")
    return weight


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders holding TensorBoard event files")
    parser.add_argument("--tag", default=DEFAULT_TAG, help=f"the scalar to draw (default: {DEFAULT_TAG})")
    parser.add_argument("--smoothing", type=smoothing_weight, default=0.6, help="TensorBoard's smoothing weight in [0, 1) (default: 0.6)")
    parser.add_argument("--out", default="curve.png", help="PNG to write (default: curve.png)")
    args = parser.parse_args(argv)
    try:
        curves = {str(Path(run)): read_scalars(run, args.tag) for run in args.runs}  # legend: the path as given
    except ValueError as error:
        parser.error(str(error))
    try:
        draw(curves, args.tag, args.smoothing, args.out)
    except ImportError as error:
        parser.exit(1, f"error: {error}\n")
    print(f"wrote {args.out}: {args.tag} of {', '.join(curves)}")


if __name__ == "__main__":
    main()
