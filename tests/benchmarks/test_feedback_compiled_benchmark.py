"""benchmarks/feedback_compiled.py runs end to end (one short round) and reports every path and
its ratios; where the compiled step is unavailable it stops saying so rather than timing the
Python step twice."""

import pytest

from agents.cores import feedback_compiled
from benchmarks import feedback_compiled as benchmark


def test_one_short_round_reports_every_path_and_the_ratios(capsys, monkeypatch):
    monkeypatch.setenv(feedback_compiled.SWITCH, "1")  # the benchmark sets it per path; restored after the test
    benchmark.main(["--seconds", "0", "--rounds", "1"])
    out = capsys.readouterr().out
    for path in ("| compiled |", "| fused |", "| lstm |", "learn: compiled / fused time", "act: compiled / fused time"):
        assert path in out


def test_it_refuses_to_run_without_the_compiled_step(monkeypatch):
    monkeypatch.setattr(feedback_compiled, "extension", lambda: None)
    with pytest.raises(SystemExit, match="the compiled Feedback step is not available here"):
        benchmark.main(["--seconds", "0", "--rounds", "1"])
