"""Exploration schedules: epsilon as a function of the frames acted so far (all envs together).

Depending on the frame counter alone, a resumed run continues the same schedule.

- ni: Ni et al.'s (NeurIPS 2023, twni2016/Memory-RL): linear from 1 to 1/T over the first 10% of
  training, then 1/T, T the env's longest episode: about one random action an episode at the end;
- linear: from `start` to `end` over the first `fraction` of training, then `end`;
- constant: `end` throughout.
"""

from __future__ import annotations

NI_FRACTION = 0.1


def linear(frames: int, total: int, start: float, end: float, fraction: float) -> float:
    """`start` at frame 0, falling linearly to `end` at frame fraction * total, `end` after it."""
    progress = min(1.0, frames / max(1.0, fraction * total))
    return start + (end - start) * progress


def epsilon(schedule: str, frames: int, total: int, start: float, end: float, fraction: float,
            longest_episode: int | None) -> float:
    """This step's epsilon under `schedule` (see the module docstring); a ValueError for the ni
    schedule without a longest episode, or for an unknown schedule."""
    if schedule == "ni":
        if not longest_episode:
            raise ValueError("epsilon schedule 'ni' decays to 1/T, T the longest episode, and this env has no bound on its "
                             "episodes; use --epsilon-schedule linear")
        return linear(frames, total, 1.0, 1.0 / longest_episode, NI_FRACTION)
    if schedule == "linear":
        return linear(frames, total, start, end, fraction)
    if schedule == "constant":
        return end
    raise ValueError(f"unknown epsilon schedule {schedule!r}; choose from ['ni', 'linear', 'constant']")
