"""A checkpoint's fields checked before a run takes them: one line naming the field and what it allows.

Loading a checkpoint builds only plain data (agents/runtime/checkpoint.py), but plain data can
still be wrong: a counter of -1e9 trains for ever, a world_size of "2" or a generator state of the
wrong length ends in a traceback from deep inside numpy or torch, weights of NaN score as if they
were a policy. The trainers (agents/learners/train.py, seqtasks/train.py) and evaluate.py
(agents/evaluation.py) check what they read with these before using it; each raises
CheckpointError naming the field.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from agents.runtime.checkpoint import CheckpointError

COUNTER_MAX = 2**62  # far beyond any run (frames, updates, episodes), far within an int64


def check_counters(counters: Any, names: tuple[str, ...]) -> dict[str, int]:
    """`counters` (a checkpoint's "counters") with each of `names` an integer in [0, COUNTER_MAX]."""
    if not isinstance(counters, dict):
        raise CheckpointError(f"the checkpoint's counters are {type(counters).__name__}, not a dict of {', '.join(names)}")
    for name in names:
        value = counters.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= COUNTER_MAX:
            raise CheckpointError(f"the checkpoint's counter {name} is {value!r}; it must be an integer in [0, {COUNTER_MAX}]")
    return counters


def check_number(field: str, value: Any, low: float = 0.0) -> float:
    """`value` as a float, refused unless a finite number >= `low` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value < math.inf:
        raise CheckpointError(f"the checkpoint's {field} is {value!r}; it must be a finite number >= {low}")
    return float(value)


def check_world_size(payload: dict[str, Any], per_rank: tuple[str, ...]) -> int:
    """The checkpoint's world_size (1 where absent: before torchrun), an integer >= 1; where above
    1, each of `per_rank` present must be a list of that many parts (distributed.gather_parts)."""
    size = payload.get("world_size", 1)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise CheckpointError(f"the checkpoint's world_size is {size!r}; it must be an integer >= 1 (the processes that trained it)")
    for key in per_rank:
        if size > 1 and key in payload and (not isinstance(payload[key], list) or len(payload[key]) != size):
            raise CheckpointError(f"the checkpoint's {key} must be a list of its {size} processes' parts (world_size {size})")
    return size


def restore(field: str, action: Callable[[], None]) -> None:
    """Run `action` (restoring `field`, e.g. the random generators), turning what numpy, torch or
    Python refuse in it into a CheckpointError naming the field."""
    try:
        action()
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError, AttributeError) as error:
        raise CheckpointError(f"the checkpoint's {field} cannot be restored: {type(error).__name__}: {error}") from None


def check_like(field: str, saved: Any, reference: dict[str, torch.Tensor]) -> None:
    """`saved` (a state dict) holds exactly `reference`'s names, each a tensor of its shape and dtype."""
    if not isinstance(saved, dict) or saved.keys() != reference.keys():
        raise CheckpointError(f"the checkpoint's {field} does not hold this model's weights (other names)")
    for name, tensor in reference.items():
        value = saved[name]
        if not isinstance(value, torch.Tensor) or value.shape != tensor.shape or value.dtype != tensor.dtype:
            got = f"{value.dtype}{list(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
            raise CheckpointError(f"the checkpoint's {field}[{name!r}] is {got}, this model's is {tensor.dtype}{list(tensor.shape)}")


def check_finite_weights(field: str, weights: dict[str, torch.Tensor]) -> None:
    """Refuse weights holding NaN or infinity: a run that diverged, whose scores would mean nothing."""
    for name, tensor in weights.items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"the checkpoint's {field}[{name!r}] holds NaN or infinite values: the run diverged, "
                                  f"and its policy cannot be scored")
