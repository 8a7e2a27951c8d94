"""experiments/tmaze_policy.py: a T-maze agent's action probabilities along the oracle's path,
for both goal sides; a run of another env is refused naming it."""

import pytest

from agents.a2c_config import resolve_config
from agents.train import Trainer
from experiments.tmaze_policy import ACTIONS, probabilities_along_the_path


def saved_run(tmp_path, env, env_options):
    config = resolve_config({"env": env, "core": "lstm", "core_options": {"hidden_size": 8}, "num_envs": 2, "rollout": 4,
                             "total_steps": 8, "seed": 0, "threads": 1, "run_dir": str(tmp_path), "env_options": env_options})
    trainer = Trainer(config)
    try:
        trainer.update()
        trainer.save()
    finally:
        trainer.close()
    return str(tmp_path)


def test_probabilities_for_both_sides_at_the_start_the_middle_and_the_junction(tmp_path):
    sides = probabilities_along_the_path(saved_run(tmp_path, "tmaze", {"length": 4}))
    assert sorted(sides) == ["down", "up"]
    for places in sides.values():
        assert sorted(places) == ["junction", "middle", "start"]
        for probabilities in places.values():
            assert len(probabilities) == len(ACTIONS) and sum(probabilities) == pytest.approx(1.0, abs=1e-5)
    # The same policy and memory up to the signal: the start differs between the sides only through it.
    assert sides["up"]["start"] != sides["down"]["start"]


def test_a_run_of_another_env_is_refused(tmp_path):
    with pytest.raises(ValueError, match="was trained on 'corridor'; this probe reads the T-maze"):
        probabilities_along_the_path(saved_run(tmp_path, "corridor", {"length": 3}))
