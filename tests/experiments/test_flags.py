"""experiments/frame/flags.py: the flags that end every experiment's own, and the output name."""

import argparse

import pytest

from agents.config.config_cli import parse_core_options
from experiments import ppo_peers
from experiments.frame.flags import add_experiment_arguments, as_published, output_name


def test_the_output_name_takes_the_learner_unless_one_is_given():
    parser = argparse.ArgumentParser()
    add_experiment_arguments(parser, None, "output file stem", algo=True)
    assert output_name(parser.parse_args([]), "mazes") == "mazes"
    assert output_name(parser.parse_args(["--algo", "ppo"]), "mazes") == "mazes_ppo"
    assert output_name(parser.parse_args(["--algo", "ppo", "--name", "mine"]), "mazes") == "mine"


def test_minibatches_without_a_choice_of_learner_is_refused():
    with pytest.raises(ValueError, match="minibatches=True needs algo=True"):
        add_experiment_arguments(argparse.ArgumentParser(), None, "output file stem", minibatches=True)


def test_the_published_lstm_keeps_torchs_biases_unless_flags_given_after_say_otherwise():
    """The experiments whose results were made before the LSTM's default became chrono build it
    with --core-opt gate_init=pytorch; a later --core-opt (--train-args come after) wins."""
    assert as_published("lstm") == ["--core-opt", "gate_init=pytorch"] and as_published("gru") == as_published("feedback") == []
    assert "gate_init=pytorch" in ppo_peers.ours_args("lstm", "corridor", 0, ppo_peers.RECIPE)
    assert "gate_init=pytorch" not in ppo_peers.ours_args("feedback", "corridor", 0, ppo_peers.RECIPE)
    assert parse_core_options("lstm", ["gate_init=pytorch", "gate_init=chrono,t_max=20"]) == {"gate_init": "chrono", "t_max": 20}
