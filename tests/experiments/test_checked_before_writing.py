"""Experiments check every setting before they write anything: a refused tuner call leaves no
study and no preset behind, so the corrected call after it is not refused as "made with another
budget", whether or not it times the runs first (--quick, --no-estimate); an open quote in
--train-args is one line, exit 2, for the mazes runner too."""

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


def test_the_mazes_runner_refuses_an_open_quote_in_train_args(tmp_path, capsys):
    from experiments import mazes

    with pytest.raises(SystemExit) as exit_info:
        mazes.main(["--quick", "--train-args", "'", "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2 and "--train-args \"'\": No closing quotation" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
