"""The order a core call fed a step at a time (core.open: feedback/core.py, lstm.py) must keep.

    run = core.open(state, steps)
    y_t = run.step(x_t, first_t)   # up to `steps` times
    y = run.outputs()              # all steps' outputs, with gradients
    state = run.finish()           # the state after them

Once outputs() has handed the steps over (to autograd, whose backward walks exactly those
steps), a later step could not join them: step() is refused. finish() hands the run's buffers on
to the next call, which may extend them in place: after it, step() and outputs() are refused.
"""

from __future__ import annotations


class StepwiseRun:
    """Keeps the order above; a run calls the checks at the start of step, outputs and finish."""

    steps: int
    t: int
    handed_over = False
    finished = False

    def check_step(self) -> None:
        if self.t == self.steps:
            raise RuntimeError(f"this run was opened for {self.steps} steps")
        if self.finished:
            raise RuntimeError("step() after finish(): this run handed its state on; open a new run from that state")
        if self.handed_over:
            raise RuntimeError(f"step() after outputs(): the outputs of this run's {self.t} steps were handed over, "
                               "and no step can join them; call finish() and open a new run")

    def check_outputs(self) -> None:
        if self.finished:
            raise RuntimeError("outputs() after finish(): this run handed its state (and buffers) on; take outputs() before finish()")
        self.handed_over = True

    def check_finish(self) -> None:
        self.finished = True
