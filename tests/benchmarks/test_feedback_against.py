"""benchmarks/feedback_against.py: the CPU preset's learning pass and its attention loops, two
checkouts in one process; here this tree against itself, so both sides run the same code."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import feedback_against

HERE = Path(__file__).resolve().parents[2]


def test_this_tree_against_itself_times_the_pass_and_each_attention_loop():
    # in a process of its own: the benchmark unloads and imports the checkouts' packages, which
    # would leave this test process with second copies of every class
    command = [sys.executable, str(HERE / "benchmarks" / "feedback_against.py"), str(HERE), "--rounds", "1", "--seconds", "0.05"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    rows = {line.split()[0]: [float(value) for value in line.split()[1:]] for line in out.splitlines()
            if line.startswith("  ") and line.split()[0].startswith(("pass", "feedback::"))}
    loops = set(rows) - {"pass", "feedback::*"}
    assert {"pass", "feedback::*", "feedback::attend", "feedback::attend_backward"} <= set(rows), out
    for side in (0, 1):  # base, this tree: ms a step
        assert all(rows[name][side] > 0 for name in loops), f"each loop is found in the profile: {out}"
        assert sum(rows[name][side] for name in loops) == pytest.approx(rows["feedback::*"][side], abs=2e-3), out  # one round: each median is the mean of the two cores, which adds up; printed to 1 us
        assert rows["feedback::*"][side] < rows["pass"][side], f"the loops are part of the pass: {out}"


def test_a_folder_that_is_no_checkout_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit):
        feedback_against.main([str(tmp_path)])
    assert f"{tmp_path} is not a checkout of this repository" in capsys.readouterr().err


def test_bad_rounds_are_refused_with_the_value(capsys):
    with pytest.raises(SystemExit):
        feedback_against.main([str(HERE), "--rounds", "0"])
    assert "--rounds must be >= 1 and --seconds > 0, got 0 and 0.5" in capsys.readouterr().err
