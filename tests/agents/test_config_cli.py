"""Env options from the command line: numbers typed, anything else passed on as the string."""

import pytest

from agents.config_cli import parse_env_options


def test_env_options_are_ints_floats_or_strings():
    options = parse_env_options(["length=8,max_episode_steps=32", "doors=fixed", "scale=0.5"])
    assert options == {"length": 8, "max_episode_steps": 32, "doors": "fixed", "scale": 0.5}
    assert type(options["length"]) is int and type(options["scale"]) is float


def test_an_env_option_without_a_value_is_refused():
    with pytest.raises(ValueError, match="env option 'doors' must look like KEY=VALUE"):
        parse_env_options(["doors"])
