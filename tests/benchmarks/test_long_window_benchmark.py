"""benchmarks/long_window.py runs end to end (one short round): a row per core and window, the
"wide" diagnostic row, the verdict per core; and the wide row's buffers are as wide as the
longest call's, put back after."""

import torch

from agents.cores import make_core
from agents.cores.feedback import core as feedback_core
from benchmarks import long_window


def test_one_short_round_reports_every_core_window_and_the_wide_row(capsys):
    per_step = long_window.main(["--rounds", "1", "--steps", "8", "--windows", "4", "8"])
    out = capsys.readouterr().out
    for row in ("| feedback | 4 |", "| feedback | 8 |", "| lstm | 4 |", "| lstm | 8 |", "| feedback | 4, wide (128 slots) |",
                "feedback: K = 8 / K = 4 per step", "lstm: K = 8 / K = 4 per step"):
        assert row in out
    assert all(seconds > 0 for seconds in per_step.values())


def test_widened_calls_make_buffers_that_wide_and_only_inside():
    core = make_core("feedback", 3, d_model=8, n_heads=2, span=4)
    x, first = torch.randn(2, 1, 3), torch.zeros(2, 1, dtype=torch.bool)
    normal = feedback_core.capacity_for
    with long_window.widened(100):
        _, state = core(x, core.initial_state(1, "cpu"), first)
    assert state.keys.shape[-1] == state.values.shape[-1] == 100 and feedback_core.capacity_for is normal
    _, state = core(x, core.initial_state(1, "cpu"), first)
    assert state.keys.shape[-1] == normal(4, 2)
