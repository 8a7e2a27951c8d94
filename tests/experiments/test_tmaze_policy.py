"""experiments/tmaze_policy.py: a T-maze agent's action probabilities along the oracle's path,
for both goal sides; its reading (walks, reaches the junction, turns, turns the right way) of
scripted policies; a run of another env is refused naming it."""

import dataclasses

import pytest
import torch

from agents.config.a2c_config import resolve_config
from agents.evaluation import load_run
from experiments import tmaze_policy
from agents.learners.train import Trainer
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


class Scripted(torch.nn.Module):
    """A stand-in policy for the probes: "right" along the corridor, then at the junction (the
    observation's first feature) the side its memory holds (`turn`: "remember", "up", or None to
    keep walking into the wall)."""

    num_actions = 4

    def __init__(self, turn):
        super().__init__()
        self.turn = turn

    def initial_state(self, batch_size, device):
        return torch.zeros(batch_size, dtype=torch.long)  # the signal seen at the start

    def forward(self, inputs, state):
        obs = inputs.obs
        state = torch.where(inputs.first[0], obs[0, :, 1], state)
        action = torch.full_like(state, ACTIONS.index("right"))
        side = {"remember": torch.where(state == 1, ACTIONS.index("up"), ACTIONS.index("down")),
                "up": torch.full_like(state, ACTIONS.index("up")), None: action}[self.turn]
        action = torch.where(obs[0, :, 0] == 1, side, action)
        return torch.nn.functional.one_hot(action, 4).float()[None] * 10, torch.zeros(1, 1), state


@pytest.mark.parametrize("turn, expected", [
    ("remember", dict(walks=True, reaches_junction=True, turns=True, turns_right_way=True)),
    ("up", dict(walks=True, reaches_junction=True, turns=True, turns_right_way=False)),  # forgot: one side only
    (None, dict(walks=True, reaches_junction=True, turns=False, turns_right_way=False)),  # walks, never turns
])
def test_the_reading_tells_walking_turning_and_remembering_apart(tmp_path, monkeypatch, turn, expected):
    run = load_run(saved_run(tmp_path, "tmaze", {"length": 4}), torch.device("cpu"))
    monkeypatch.setattr(tmaze_policy, "load_run", lambda *args: dataclasses.replace(run, policy=Scripted(turn)))
    assert tmaze_policy.reading(str(tmp_path)) == expected
