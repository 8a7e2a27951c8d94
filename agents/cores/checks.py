"""Validation shared by the core configs: errors that name the field, its value and what is allowed."""

from __future__ import annotations

import math
import numbers

FLOAT32_MAX = 3.4028234663852886e38  # the largest finite float32


def check_at_least(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def check_fraction(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")


def check_heads(d_model: int, n_heads: int) -> None:
    check_at_least("d_model", d_model, 1)
    check_at_least("n_heads", n_heads, 1)
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")


def check_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < float("inf"):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def check_unit_interval(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")


def check_float32(name: str, value) -> None:
    """Raise a ValueError naming `name` if `value` (a finite number already checked) exceeds the
    largest float32: the optimiser computes in float32, and a learning rate of 1e39 overflows there."""
    if value > FLOAT32_MAX:
        raise ValueError(f"{name} must be at most {FLOAT32_MAX:.7g} (the largest float32, which the optimiser computes in), got {value!r}")


def check_float(name: str, value, low: float | None = None, high: float | None = None, *,
                low_open: bool = False, high_open: bool = False, note: str = "") -> None:
    """Raise a ValueError naming `name` unless `value` is a finite real number (an int, a float,
    a NumPy scalar; not a bool) within the bounds: >= low (> low if low_open), <= high (< high if
    high_open).

    NaN and +-inf are always refused: `nan < 0` and `nan > 0` are both False, so a check written
    as `if x < 0: raise` lets NaN through. `note` (e.g. "0: no clipping") is added to the error.
    """
    if low is not None and high is not None:
        allowed = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    elif low is not None:
        allowed = f"a finite number {'>' if low_open else '>='} {low}"
    elif high is not None:
        allowed = f"a finite number {'<' if high_open else '<='} {high}"
    else:
        allowed = "a finite number"
    if note:
        allowed += f" ({note})"
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not _finite(value):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    if high is not None and (value >= high if high_open else value > high):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _finite(value: numbers.Real) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False
