"""Training stops at a non-finite loss or gradient, before the broken weights are saved.

A NaN or an infinity in a loss or a gradient spreads to every weight in one optimiser step, and a
checkpoint of those weights is a run lost for good (the last good checkpoint overwritten). Asking
after every update would read a value back from the device each time (on a GPU, a stall), so
`FiniteWatch.note` keeps, on the device, the first update whose values were not finite, and
`check` reads it back where the trainers read the device anyway: before every checkpoint (the
exit's included) and when they log. `check` raises NonFiniteError naming that update; the
trainers then save nothing, and the last good checkpoint stays.
"""

from __future__ import annotations

import os

import torch

from agents.runtime.checkpoint import run_checkpoint


class NonFiniteError(RuntimeError):
    """A loss or gradient was NaN or infinite; the message names the update and what was kept."""


class FiniteWatch:
    """The first update (1-based) whose noted values were not all finite, kept on the device."""

    def __init__(self) -> None:
        self.first_bad: torch.Tensor | None = None  # 0-dim long on the values' device; 0 while all were finite

    def note(self, update: int, values: list[torch.Tensor]) -> None:
        """Note update `update`'s `values` (losses, gradient norms: any shapes, one device); no host sync."""
        bad = torch.stack([(~torch.isfinite(value.detach().float())).any() for value in values]).any()
        if self.first_bad is None or self.first_bad.device != bad.device:
            self.first_bad = torch.zeros((), dtype=torch.long, device=bad.device)
        self.first_bad.masked_fill_(bad & (self.first_bad == 0), update)

    def check(self, where: str) -> None:
        """Raise NonFiniteError if a noted update was not finite; `where` says what was kept."""
        first = 0 if self.first_bad is None else int(self.first_bad)
        if first:
            raise NonFiniteError(f"the loss or the gradient was not finite (NaN or infinite) at update {first}; training stopped "
                                 f"without saving the weights that followed it; {where}")

    def check_run(self, run_dir: str | os.PathLike) -> None:
        """`check` for a trainer writing checkpoints in `run_dir`: the error says where the last
        good one is, or that nothing was saved."""
        path = run_checkpoint(run_dir)
        self.check(f"the last good checkpoint is {path}" if path.is_file() else "nothing was saved")


def total_norm(parameters: list[torch.Tensor]) -> torch.Tensor:
    """The global L2 norm of the gradients of `parameters` (what clip_grad_norm_ returns,
    without clipping); 0 where none has a gradient."""
    norms = [torch.linalg.vector_norm(p.grad.detach().float()) for p in parameters if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.zeros(())
