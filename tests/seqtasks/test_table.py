"""The Table 1 runner's smoke run: it trains, scores and writes the markdown beside the paper's numbers."""

import pytest

from seqtasks.table import main


def test_quick_table_writes_rows_beside_the_paper(tmp_path):
    output = tmp_path / "table.md"
    table = main(["--quick", "--rows", "random_walk", "algorithmic_5", "--cores", "feedback", "lstm", "--output", str(output), "--runs", str(tmp_path / "runs")])
    assert output.read_text() == table
    lines = table.splitlines()
    assert lines[0] == "| task | paper Transformer | paper Feedback | paper LSTM | ours feedback | ours lstm |"
    assert lines[2].startswith("| random_walk | 68 | 100 | - | ") and "(3 upd)" in lines[2]
    assert lines[3].startswith("| algorithmic_5 | 37.5 | 92.6 | 32.1 | ")
    assert (tmp_path / "runs" / "random_walk-lstm" / "results.json").is_file()


def test_table_refuses_unknown_rows_and_bad_minutes(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--rows", "sorting"])
    assert exit_info.value.code == 2 and "invalid choice: 'sorting'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--minutes", "0"])
    assert exit_info.value.code == 2 and "--minutes must be > 0, got 0.0" in capsys.readouterr().err
