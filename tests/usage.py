"""Helpers for tests of command lines refusing their input."""

import pytest


def refused(capsys, command, argv) -> str:
    """Run command line `command(argv)` expecting a usage error (exit code 2); its stderr."""
    with pytest.raises(SystemExit) as exit_info:
        command(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err
