"""Benchmark targets: ratios of two speeds measured in the same run, and their PASS/FAIL lines.

A speed measured on one machine says little about another, and on a shared machine little about
the same machine an hour later. So a target never names an absolute figure: it is ours / a
reference timed beside it in this run (another of our cores, a naive reference, a peer
library), interleaved (`interleaved`) wherever a change in load could tip the verdict.
Figures from elsewhere may be printed as context, labelled with their machine, never as targets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Verdict:
    """ours / reference against `at_least`; `ratio` None when a side was not measured (`why_not`)."""

    name: str  # what is divided by what, e.g. "feedback / transformer tokens/s"
    at_least: float
    ratio: float | None
    why_not: str = ""

    @property
    def passed(self) -> bool:
        return self.ratio is not None and self.ratio >= self.at_least

    def line(self) -> str:
        if self.ratio is None:
            return f"SKIP  {self.name} >= {self.at_least:.3g}: {self.why_not}"
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.ratio:.2f} (target >= {self.at_least:.3g})"


def ratio_target(name: str, ours: float | None, reference: float | None, at_least: float, why_not: str) -> Verdict:
    """The verdict on ours / reference >= at_least; `why_not` says why, if either is None."""
    if ours is None or reference is None:
        return Verdict(name, at_least, None, why_not)
    return Verdict(name, at_least, ours / reference)


def report(verdicts: Iterable[Verdict], check: bool) -> int:
    """Print one line per verdict; return the exit status: 1 under `check` if a measured target
    failed or none was measured (a skipped one, e.g. a peer library not installed, is no failure)."""
    verdicts = list(verdicts)
    for verdict in verdicts:
        print(verdict.line())
    measured = [v for v in verdicts if v.ratio is not None]
    if not measured:
        print("CHECK not run: no target was measured in this run")
    return 1 if check and (not measured or not all(v.passed for v in measured)) else 0


def interleaved(items: Sequence[T], rounds: int) -> list[T]:
    """The items in measuring order: each once a round, every other round reversed (A B C, C B A,
    A B C, ...), so that no item always runs first or last."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    return [item for r in range(rounds) for item in (items if r % 2 == 0 else items[::-1])]


def per_call(call: Callable[[], Any], seconds: float) -> float:
    """Seconds per call of call(), after one untimed call, repeated for `seconds` (at least once)."""
    call()
    calls, start = 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - start < seconds:
        call()
        calls += 1
    return (time.perf_counter() - start) / calls


def floor_per_call(call: Callable[[], Any], seconds: float, repeats: int = 5) -> float:
    """The least of `repeats` per_call timings, `seconds` in all: a floor that a pause by the
    scheduler does not raise, so two floors taken under the same load compare."""
    return min(per_call(call, seconds / repeats) for _ in range(repeats))
