"""Carried memory that acting extends in place instead of copying.

A state holds buffers with room beyond its last `span` slots: slots [end - span, end) are its
memory, and a call with T steps writes slots [end, end + T) and returns a state with end + T,
on the same buffers. Nothing the old state can see is overwritten, so it stays valid; acting
(T = 1 per call) then costs one step, not a copy of the whole memory.

Two calls from the same state would both write at `end`. The `AppendLog` shared by all states
on one set of buffers records how far they have been written; a call whose state is not at the
head (someone else has written past it), or that would run out of room, starts new buffers
with a copy of its window instead.
"""

from __future__ import annotations

HEADROOM = 64  # slots allocated past the span: one copy of the memory per HEADROOM acting steps


class AppendLog:
    """How far the buffers of a family of states have been written."""

    def __init__(self, end: int):
        self.end = end

    def can_extend(self, end: int, steps: int, capacity: int) -> bool:
        """Whether a state ending at `end` may write `steps` more slots in place."""
        return self.end == end and end + steps <= capacity


def capacity_for(span: int, steps: int) -> int:
    """Slots of new buffers: the span, then room for this call and later acting steps."""
    return span + max(steps, HEADROOM)
