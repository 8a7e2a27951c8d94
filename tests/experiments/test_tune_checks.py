"""The tuner checks every setting before it writes anything: a refused call leaves no study and
no preset behind, so the corrected call after it is not refused as "made with another budget",
whether or not it times the runs first (--quick, --no-estimate)."""

import pytest

from experiments import tune


@pytest.mark.parametrize("mode", [["--quick"], ["--quick", "--no-estimate"]])
@pytest.mark.parametrize("argv, message", [
    (["--env-opt", "length=abc"], "length must be an integer >= 1, got 'abc'"),
    (["--train-args", "'"], "--train-args \"'\": No closing quotation"),
])
def test_a_bad_setting_is_refused_before_anything_is_written(tmp_path, capsys, mode, argv, message):
    runs = tmp_path / "runs"
    with pytest.raises(SystemExit) as exit_info:
        tune.main([*mode, "--cores", "lstm", "--trials", "1", "--runs-dir", str(runs), "--out", str(tmp_path / "out"), *argv])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not runs.exists() and not (tmp_path / "out").exists()
