"""Aggregates over seeds as Agarwal et al. (2021, "Deep RL at the Edge of the Statistical
Precipice") ask: the interquartile mean (IQM) with a stratified-bootstrap 95% confidence
interval, computed by their library, rliable, rather than by hand."""

from __future__ import annotations

import argparse
import copy
import warnings

import numpy as np

from envs.cli import positive_int

MIN_RUNS = 2  # a confidence interval needs at least two runs to bootstrap from
BOOTSTRAP_REPS = 2000  # rliable's default is 50,000; 2,000 moves a 95% interval's ends by well under 1%


def trimmed_mean(x: np.ndarray) -> np.ndarray:
    """(runs, points) -> (points,): the mean of each column's middle half, as rliable's
    aggregate_iqm (scipy's trim_mean at 25%) computes it: the same cuts, the same partition.
    Written out because a bootstrap calls it thousands of times a cell, and scipy's wrapper
    around the same two numpy calls costs some 0.5 ms a call: 4 s of a sweep's cell."""
    cut = int(0.25 * x.shape[0])
    middle = np.partition(x, (cut, x.shape[0] - cut - 1), axis=0)[cut:x.shape[0] - cut].mean(axis=0)
    return np.where(np.isnan(x).any(axis=0), np.nan, middle)  # a NaN score makes its column NaN, as in scipy


_KNOWN: dict[tuple, dict[str, dict[str, float]]] = {}  # iqm_interval's answers in this process, by scores and seed


def iqm_interval(scores: dict[str, np.ndarray], seed: int = 0) -> dict[str, dict[str, float]]:
    """{name: (runs,) or (runs, points) scores} -> {name: {"iqm", "ci_low", "ci_high"}}, each a
    float, or a list over points for 2-D scores (the IQM over runs at each point).

    Seeded, so the same scores give the same interval (with the same numpy): rliable 1.2's
    stratified bootstrap draws its resamples from numpy's global generator (`np.random.choice`),
    not from the `random_state` it is given, so that generator is seeded for the call and put
    back as it was after it. An answer is kept for the rest of the process, since a sweep
    rewrites its summary after each length with every cell so far."""
    from rliable import library as rly

    matrices = {}
    for name, values in scores.items():
        values = np.asarray(values, dtype=np.float64)
        if values.ndim not in (1, 2) or values.shape[0] < MIN_RUNS:
            raise ValueError(f"{name!r}: need (runs,) or (runs, points) scores with at least {MIN_RUNS} runs, got shape {values.shape}")
        matrices[name] = values.reshape(values.shape[0], -1)
    key = (seed, *((name, np.shape(values), matrices[name].tobytes()) for name, values in scores.items()))
    if key not in _KNOWN:
        outer = np.random.get_state()
        np.random.seed(seed)  # what rliable's resamples are drawn from (the docstring)
        try:
            with warnings.catch_warnings():  # arch's notice that RandomState is deprecated (rliable passes one)
                warnings.simplefilter("ignore", FutureWarning)
                points, intervals = rly.get_interval_estimates(
                    matrices, trimmed_mean, reps=BOOTSTRAP_REPS, random_state=np.random.RandomState(seed)
                )
        finally:
            np.random.set_state(outer)
        result = {}
        for name, values in scores.items():
            squeeze = (lambda a: float(a[0])) if np.ndim(values) == 1 else (lambda a: a.tolist())  # noqa: E731
            result[name] = {"iqm": squeeze(points[name]), "ci_low": squeeze(intervals[name][0]), "ci_high": squeeze(intervals[name][1])}
        _KNOWN[key] = result
    return copy.deepcopy(_KNOWN[key])


def solved_interval(successes: np.ndarray, threshold: float) -> dict[str, float]:
    """How many runs solved a task (success >= threshold) and the Wilson 95% interval of the
    probability that a run does: {"solved", "runs", "ci_low", "ci_high"}. Per-run success is
    near all-or-nothing where a run either learns a memory or not, so the probability of
    learning it is the number to compare, and with 10 runs its interval is wide and says so."""
    from scipy.stats import binomtest

    successes = np.asarray(successes, dtype=np.float64)
    solved = int((successes >= threshold).sum())
    interval = binomtest(solved, len(successes)).proportion_ci(confidence_level=0.95, method="wilson")
    return {"solved": solved, "runs": len(successes), "ci_low": float(interval.low), "ci_high": float(interval.high)}


def seed_count(text: str) -> int:
    """argparse type for an experiment's --seeds: an integer of at least MIN_RUNS."""
    count = positive_int(text)
    if count < MIN_RUNS:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_RUNS} for a confidence interval, got {count}")
    return count

