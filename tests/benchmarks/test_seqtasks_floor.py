"""benchmarks/seqtasks.py --floor: our Feedback update's floor from its parts, at (here, tiny)
Table 9 sizes, and the most our / the authors' tokens/s could read at it."""

import re

import pytest

from benchmarks import seqtasks as benchmark

TINY = dict(benchmark.PAPER, d_model=16, n_layers=1, n_heads=2, span=4, bptt=4, dropout=0.0)


def test_the_floor_is_per_step_of_the_block_and_bounds_the_ratio_to_the_authors(capsys, monkeypatch):
    monkeypatch.setattr(benchmark, "PAPER", TINY)
    measured = {"feedback": 0.5, benchmark.THEIRS + "feedback": 1.0}  # s per update: ours 2x theirs
    benchmark.floor(batch=2, s_per_update=measured, replay_seconds=0.002)
    out = capsys.readouterr().out
    step = re.search(r"in all +([0-9.]+) +([0-9.]+)  against ([0-9.]+) measured", out)
    assert step and float(step.group(3)) == pytest.approx(1e3 * 0.5 / TINY["bptt"])  # ms a step of the 4-step block
    for way, floor_ms in (("warm", float(step.group(1))), ("out of L2", float(step.group(2)))):
        bound = re.search(rf"ours at its floor \({way}\) would be ([0-9.]+)x the authors' feedback tokens/s.*\(measured: 2.00x; target 2.5x\)", out)
        assert bound and float(bound.group(1)) == pytest.approx(1.0 / (TINY["bptt"] * floor_ms / 1e3), rel=0.01)


def test_floor_needs_the_feedback_core_on_the_cpu(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["seqtasks.py", "--cores", "lstm", "--floor"])
    with pytest.raises(SystemExit) as exit_:
        benchmark.main()
    assert exit_.value.code == 2 and "--floor needs feedback among --cores and --device cpu, got --cores lstm --device cpu" in capsys.readouterr().err
