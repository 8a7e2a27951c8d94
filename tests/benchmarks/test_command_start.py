"""benchmarks/command_start.py: its measurement is the command server's, whose behaviour
tests/experiments/test_preloaded.py covers; here, that bad sizes are refused by value."""

import pytest

from benchmarks import command_start


@pytest.mark.parametrize("flags", [["--rounds", "0"], ["--commands", "0"]])
def test_rounds_and_commands_below_one_are_refused_with_the_values(flags, capsys):
    with pytest.raises(SystemExit):
        command_start.main(flags)
    assert "--rounds and --commands must be >= 1, got" in capsys.readouterr().err
