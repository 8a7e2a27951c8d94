"""agents/cores/checks.py's check_float, and every float option of every core refusing NaN and
infinities by name (the field list comes from the config dataclasses, so a new float option is
covered as it is added)."""

import dataclasses
import math
import re
import typing

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.cores import CORES, make_core
from agents.cores.checks import check_float

NOT_FINITE = [math.nan, math.inf, -math.inf]
INPUT_DIM = 5


def float_fields(config_class: type) -> list[str]:
    hints = typing.get_type_hints(config_class)
    return [f.name for f in dataclasses.fields(config_class) if hints[f.name] is float]


CORE_FLOATS = sorted({(core, name) for core, (config_class, _) in CORES.items() for name in float_fields(config_class)})


def test_the_core_float_options_are_found():
    assert {("feedback", "dropout"), ("transformer", "dropout"), ("transformer", "gate_bias"), ("reservoir", "spectral_radius"),
            ("reservoir", "leak_rate"), ("reservoir", "input_scaling"), ("reservoir", "density")} <= set(CORE_FLOATS)


@pytest.mark.parametrize("bad", NOT_FINITE, ids=repr)
@pytest.mark.parametrize("core, name", CORE_FLOATS)
def test_every_core_float_option_refuses_nan_and_infinities_by_name(core, name, bad):
    config_class, _ = CORES[core]
    message = rf"^{name} must be .*, got {re.escape(repr(bad))}$"
    with pytest.raises(ValueError, match=message):
        config_class(**{name: bad})
    with pytest.raises(ValueError, match=message):
        make_core(core, INPUT_DIM, **{name: bad})


@pytest.mark.parametrize("value, low, high, options, allowed", [
    (math.nan, 0, None, {"low_open": True}, "a finite number > 0"),
    (math.inf, 0, None, {}, "a finite number >= 0"),
    (-math.inf, None, None, {}, "a finite number"),
    (math.nan, None, 1, {"high_open": True}, "a finite number < 1"),
    (0.0, 0, None, {"low_open": True}, "a finite number > 0"),
    (-1e-9, 0, None, {"note": "0: no clipping"}, r"a finite number >= 0 \(0: no clipping\)"),
    (1.5, 0, 1, {}, r"in \[0, 1\]"),
    (1, 0, 1, {"high_open": True}, r"in \[0, 1\)"),
    (0, 0, 1, {"low_open": True}, r"in \(0, 1\]"),
    (math.nan, 0, 1, {}, r"in \[0, 1\]"),
    (True, 0, 1, {}, r"in \[0, 1\]"),
    ("0.5", 0, 1, {}, r"in \[0, 1\]"),
    (None, 0, None, {}, "a finite number >= 0"),
    (10**400, 0, None, {}, "a finite number >= 0"),  # too large for a float: not finite, not OverflowError
])
def test_check_float_refuses_naming_the_setting_the_value_and_what_is_allowed(value, low, high, options, allowed):
    with pytest.raises(ValueError, match=rf"^rate must be {allowed}, got {re.escape(repr(value))}$"):
        check_float("rate", value, low, high, **options)


@pytest.mark.parametrize("value", [0, 0.0, 1, 1.0, 0.5, np.float32(0.25), np.float64(1.0), np.int64(0)])
def test_check_float_takes_finite_numbers_in_range_bounds_included(value):
    check_float("rate", value, 0, 1)


@given(st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.booleans())
def test_check_float_passes_exactly_the_finite_values_in_range(value, low_open, high_open):
    inside = (value > -1 if low_open else value >= -1) and (value < 2 if high_open else value <= 2)
    try:
        check_float("x", value, -1, 2, low_open=low_open, high_open=high_open)
    except ValueError:
        assert not (math.isfinite(value) and inside)
    else:
        assert math.isfinite(value) and inside
