"""Options from the command line: env options typed as numbers where they read as one, else
passed on as the string; core options typed by the core's defaults."""

import pytest

from agents.config.config_cli import parse_core_options, parse_env_options
from agents.cores import make_core


def test_env_options_are_bools_ints_floats_or_strings():
    options = parse_env_options(["length=8,max_episode_steps=32", "doors=fixed", "scale=0.5", "expose_goal=True,show_time=false"])
    assert options == {"length": 8, "max_episode_steps": 32, "doors": "fixed", "scale": 0.5, "expose_goal": True, "show_time": False}
    assert type(options["length"]) is int and type(options["scale"]) is float and options["expose_goal"] is True


def test_an_env_option_without_a_value_is_refused():
    with pytest.raises(ValueError, match="env option 'doors' must look like KEY=VALUE"):
        parse_env_options(["doors"])


def test_the_recurrent_gate_init_options_are_parsed_and_reach_the_core():
    options = parse_core_options("lstm", ["gate-init=chrono,t_max=50"])
    assert options == {"gate_init": "chrono", "t_max": 50} and type(options["t_max"]) is int
    assert make_core("lstm", 3, **options).config.t_max == 50
    assert parse_core_options("gru", ["gate_init=forget_bias"]) == {"gate_init": "forget_bias"}
