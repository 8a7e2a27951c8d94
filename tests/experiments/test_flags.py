"""experiments/frame/flags.py: the flags that end every experiment's own, and the output name."""

import argparse

import pytest

from experiments.frame.flags import add_experiment_arguments, output_name


def test_the_output_name_takes_the_learner_unless_one_is_given():
    parser = argparse.ArgumentParser()
    add_experiment_arguments(parser, None, "output file stem", algo=True)
    assert output_name(parser.parse_args([]), "mazes") == "mazes"
    assert output_name(parser.parse_args(["--algo", "ppo"]), "mazes") == "mazes_ppo"
    assert output_name(parser.parse_args(["--algo", "ppo", "--name", "mine"]), "mazes") == "mine"


def test_minibatches_without_a_choice_of_learner_is_refused():
    with pytest.raises(ValueError, match="minibatches=True needs algo=True"):
        add_experiment_arguments(argparse.ArgumentParser(), None, "output file stem", minibatches=True)
