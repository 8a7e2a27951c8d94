"""experiments/frame/tables.py: the markdown tables every experiment writes (assets/EXPERIMENT/NAME.md)."""

import pytest

from experiments.frame.tables import format_interval, format_solved, markdown_table, minutes_per_run


def test_a_table_is_its_caption_a_blank_line_the_header_its_rule_and_a_line_per_row():
    text = markdown_table(["model", "success"], [["lstm", 0.5], ["mlp", "-"]], "Success, IQM.")
    assert text == "Success, IQM.\n\n| model | success |\n|---|---|\n| lstm | 0.5 |\n| mlp | - |\n"
    assert markdown_table(["a"], []) == "| a |\n|---|\n"


def test_a_row_of_the_wrong_width_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"a row of 1 cells under 2 columns \['model', 'success'\]: \['lstm'\]"):
        markdown_table(["model", "success"], [["lstm"]])


def test_the_shared_cells():
    assert format_interval({"iqm": 0.5, "ci_low": 0.25, "ci_high": 0.75}) == "0.50 [0.25, 0.75]"
    assert format_interval({"iqm": 1234.4, "ci_low": 1000, "ci_high": 1500}, 0) == "1234 [1000, 1500]"
    assert format_solved({"solved": 1, "runs": 4, "ci_low": 0.046, "ci_high": 0.699}) == "1 of 4, 0.25 [0.05, 0.70]"
    assert minutes_per_run([60.0, 120.0]) == "1.5 min"
