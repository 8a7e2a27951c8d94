"""Reading a seqtasks run's validation history (results.json "history": one entry per validation
with its update, the training seconds so far and the metrics) at equal updates or equal time.

The history is a step function: a metric holds its last validated value until the next
validation, and is 0 before the first (an untrained model is scored as knowing nothing). A run
stopped early at 100% keeps that value after its end.
"""

from __future__ import annotations

import numpy as np


def value_at(history: list[dict], metric: str, update: int | None = None, seconds: float | None = None) -> float:
    """`metric` of the last validation at or before `update` (or training `seconds`); 0 before any."""
    passed = [h for h in history if (update is None or h["update"] <= update) and (seconds is None or h["seconds"] <= seconds + 1e-9)]
    return passed[-1][metric] if passed else 0.0


def time_curve(history: list[dict], metric: str, times: np.ndarray) -> np.ndarray:
    """(len(times),) the step function's value at each of `times` (training seconds)."""
    return np.array([value_at(history, metric, seconds=t) for t in times])


def aucc(history: list[dict], metric: str, horizon: float) -> float:
    """Area under the convergence curve (Shen et al., "Reservoir Transformers"): the integral of the
    validation metric over training wall-clock time from 0 to `horizon`, divided by `horizon`, so
    that 1 is a model perfect from the first second and the value is the mean metric over time."""
    if not horizon > 0:
        raise ValueError(f"horizon must be > 0 seconds, got {horizon!r}")
    points = [(h["seconds"], h[metric]) for h in history if h["seconds"] < horizon]
    starts = [t for t, _ in points] + [horizon]
    return float(sum(value * (end - start) for (start, value), end in zip(points, starts[1:])) / horizon)


def seconds_to_reach(history: list[dict], metric: str, level: float) -> float | None:
    """Training seconds at the first validation with `metric` >= `level`; None if never."""
    return next((h["seconds"] for h in history if h[metric] >= level), None)
