"""Options from the command line: env options typed as numbers where they read as one, else
passed on as the string; core options typed by the core's defaults."""

import dataclasses

import pytest

from agents.config.a2c_config import A2CConfig
from agents.config.config_cli import parse_core_options, parse_env_options, run_core_options
from agents.cores import make_core
from agents.learners.train import config_from_checkpoint


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


def test_a_run_records_its_recurrent_initialisation_and_a_checkpoint_from_before_the_lstms_new_default_reads_as_torchs():
    """Every new LSTM or GRU run saves gate_init and t_max (the LSTM's default was chrono from
    2026-11-27 to 2026-12-06); a saved config without them was made when both started from
    torch's biases."""
    assert run_core_options("lstm", {"hidden_size": 8}, "cpu", "fp32") == {"hidden_size": 8, "gate_init": "pytorch", "t_max": 100}
    assert run_core_options("gru", {}, "cpu", "fp32") == {"gate_init": "pytorch", "t_max": 100}
    assert run_core_options("lstm", {"gate_init": "forget_bias"}, "cpu", "fp32")["gate_init"] == "forget_bias"
    before = dataclasses.asdict(A2CConfig(core="lstm", core_options={"hidden_size": 8}))
    config = config_from_checkpoint(A2CConfig, {"config": before})
    assert config.core_options == {"hidden_size": 8, "gate_init": "pytorch", "t_max": 100}
    saved_since = {**before, "core_options": {"hidden_size": 8, "gate_init": "chrono", "t_max": 100}}
    assert config_from_checkpoint(A2CConfig, {"config": saved_since}).core_options["gate_init"] == "chrono"
