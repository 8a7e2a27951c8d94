"""Stop when solved: score the greedy policy as it trains, record when it first solves the task.

With `--solve-at X` a trainer scores its greedy policy every so many frames on evaluation streams
that training never sees (agents/runtime/seeding.py: the evaluation purpose, seed CHECK_SEED, the
same episodes for every run and every check): the mean of an episode quantity (`--solve-metric`,
default success) over `--eval-episodes` episodes. The first check that reaches X is confirmed at
once on fresh episodes (seed CONFIRM_SEED), so that one lucky draw of 100 episodes does not count;
if the confirmation reaches X too, the run is solved at that check's frames, episodes and wall
seconds, and training stops. A confirmation that falls short is kept in the history and training
goes on. A run that reaches --total-steps unsolved is censored there: its frames to solve are
more than the cap, not the cap.

When checks happen: the first after `--eval-every` frames, then each after a gap of
max(eval_every, eval_growth x the frames trained so far), so with a growth of 0.1 the frames to
solve are read to within 10% at every scale (a log axis's resolution), and at the cap itself.
The gaps depend on the frame counts only, so every rank of a torchrun run and a resumed run check
at the same updates.

Scoring saves and restores the global random generators, so a run with checks makes exactly the
updates of the same run without them, up to the update at which it stops.

The state (each check, the solving one, the next check's frame, the loop's wall seconds over
every sitting) is in the checkpoint, and `record` is written to RUN/solve.json at every check and
at the end, atomically: a run killed with -9 resumes from its checkpoint, makes the same updates
again and checks at the same frames, so its record is the same.
"""

from __future__ import annotations

import math
from typing import Any, Callable

CHECK_SEED = 10_000  # evaluation streams of every check (also the experiments' evaluate.py seed: experiments/frame/jobs.py:EVAL_SEED)
CONFIRM_SEED = 20_000  # fresh evaluation streams for the confirming check
RECORD = "solve.json"  # in the run folder


class SolveCheck:
    """When to score the policy, what each score was, and whether (and when) the run solved.

    `at`: the criterion (None: no checks; the loop's seconds are still counted); `metric`: the
    episode quantity whose mean is scored; `every`, `growth`: the gaps between checks (above)."""

    def __init__(self, at: float | None, metric: str, every: int, growth: float, episodes: int):
        self.at, self.metric, self.every, self.growth, self.episodes = at, metric, every, growth, episodes
        self.checks: list[dict[str, Any]] = []  # every check in order: frames, episodes, seconds, score (and confirmation)
        self.solved: dict[str, Any] | None = None  # the check that solved it, confirmed
        self.next_at = every  # the frame count at which the next check is due
        self.seconds = 0.0  # wall seconds in the training loop, every sitting (updates and checks)
        self.check_seconds = 0.0  # of which scoring the policy

    def due(self, frames: int, total_steps: int) -> bool:
        """Whether a check is due after an update that brought the run to `frames`."""
        if self.at is None or self.solved is not None:
            return False
        checked_here = bool(self.checks) and self.checks[-1]["frames"] == frames
        return frames >= self.next_at or (frames >= total_steps and not checked_here)

    def score(self, play: Callable[[int], dict[str, Any]], frames: int, episodes: int) -> dict[str, Any]:
        """One check of the policy at `frames` (and `episodes` trained): `play(seed)` gives the
        episodes' quantities (agents/learners/play.py), confirmed on CONFIRM_SEED's streams where
        CHECK_SEED's reach the criterion. The check's entry; nothing is kept here (`add` keeps
        it: under torchrun rank 0 scores and every rank adds)."""
        entry: dict[str, Any] = {"frames": frames, "episodes": episodes, "seconds": round(self.seconds, 1),
                                 "score": self._mean(play(CHECK_SEED))}
        if entry["score"] >= self.at:
            entry["confirmation"] = self._mean(play(CONFIRM_SEED))
        return entry

    def _mean(self, results: dict[str, Any]) -> float:
        if self.metric not in results:
            raise ValueError(f"--solve-metric {self.metric!r}: the env's episodes report {sorted(results)}, not {self.metric!r}")
        return float(results[self.metric].mean())

    def add(self, entry: dict[str, Any]) -> bool:
        """Keep a check's entry and set when the next is due; whether the run is now solved."""
        self.checks.append(entry)
        frames = entry["frames"]
        self.next_at = frames + max(self.every, math.ceil(self.growth * frames))
        if entry.get("confirmation", -math.inf) >= self.at:
            self.solved = entry
        return self.solved is not None

    def record(self, frames: int, total_steps: int) -> dict[str, Any]:
        """What RUN/solve.json holds: the criterion, the frames, episodes and wall seconds to
        solve (None unsolved), `censored_at` (the cap, where the run reached it unsolved), and
        every check."""
        solved = self.solved
        return {
            "criterion": {"metric": self.metric, "at_least": self.at, "episodes": self.episodes, "check_seed": CHECK_SEED,
                          "confirm_seed": CONFIRM_SEED, "eval_every": self.every, "eval_growth": self.growth},
            "solved": solved is not None,
            "frames_to_solve": solved["frames"] if solved else None,
            "episodes_to_solve": solved["episodes"] if solved else None,
            "seconds_to_solve": solved["seconds"] if solved else None,
            "censored_at": total_steps if solved is None and frames >= total_steps else None,
            "frames_trained": frames,
            "seconds": round(self.seconds, 1),
            "check_seconds": round(self.check_seconds, 1),
            "checks": self.checks,
        }

    def state_dict(self) -> dict[str, Any]:
        return {"checks": self.checks, "solved": self.solved, "next_at": self.next_at, "seconds": self.seconds,
                "check_seconds": self.check_seconds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`'s; a ValueError naming what does not fit (a checkpoint's)."""
        try:
            checks, solved = list(state["checks"]), state["solved"]
            next_at, seconds, check_seconds = int(state["next_at"]), float(state["seconds"]), float(state["check_seconds"])
            ok = all(isinstance(check, dict) and "frames" in check and "score" in check for check in checks)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"the checkpoint's solve state is not one this version wrote: {error!r}") from None
        if not ok or (solved is not None and not isinstance(solved, dict)) or next_at < 1 or not 0 <= seconds < math.inf:
            raise ValueError("the checkpoint's solve state is not one this version wrote: "
                             f"checks {len(checks)}, solved {solved!r}, next_at {next_at}, seconds {seconds}")
        self.checks, self.solved, self.next_at, self.seconds, self.check_seconds = checks, solved, next_at, seconds, check_seconds
