"""What the policy feeds its core: the observation, and by default the previous action and reward;
and checkpoints written before encoders were chosen by space still load."""

import pytest
import torch
from gymnasium.spaces import MultiDiscrete

from agents.config.a2c_config import A2CConfig, resolve_config
from agents.config.config_cli import given_fields
from agents.model.policy import Policy
from agents.model.step_inputs import StepInputs
from agents.command_line import make_parser
from agents.learners.train import Trainer

NVEC, ACTIONS, T, B = [3, 4], 3, 5, 6


def outputs(policy: Policy, prev_action, prev_reward):
    obs = torch.randint(0, 3, (T, B, len(NVEC)), generator=torch.Generator().manual_seed(1))
    first = torch.zeros(T, B, dtype=torch.bool)
    first[0] = True
    logits, values, _ = policy(StepInputs(obs, prev_action, prev_reward, first), policy.initial_state(B, "cpu"))
    return logits, values


def test_without_previous_inputs_the_policy_ignores_the_last_action_and_reward():
    generator = torch.Generator().manual_seed(0)
    actions = [torch.randint(0, ACTIONS + 1, (T, B), generator=generator) for _ in range(2)]
    rewards = [torch.rand(T, B, generator=generator) for _ in range(2)]
    for previous_inputs in (True, False):
        torch.manual_seed(0)
        policy = Policy(MultiDiscrete(NVEC), ACTIONS, "lstm", {}, embed_dim=4, previous_inputs=previous_inputs)
        (logits_a, values_a), (logits_b, values_b) = (outputs(policy, a, r) for a, r in zip(actions, rewards))
        if previous_inputs:
            assert not torch.allclose(logits_a, logits_b) and not torch.allclose(values_a, values_b)
            assert policy.core.lstm.input_size == len(NVEC) * 4 + 4 + 1
        else:
            assert torch.equal(logits_a, logits_b) and torch.equal(values_a, values_b)
            assert policy.core.lstm.input_size == len(NVEC) * 4 and policy.action_embed is None


def test_no_previous_inputs_flag_reaches_the_config():
    args = make_parser(Trainer, "").parse_args(["--env", "corridor", "--no-previous-inputs"])
    assert resolve_config(given_fields(args, A2CConfig)).previous_inputs is False
    assert resolve_config({"env": "corridor"}).previous_inputs is True
    with pytest.raises(ValueError, match="previous_inputs must be True or False, got 'no'"):
        A2CConfig(previous_inputs="no")


def test_a_checkpoint_with_the_old_embedding_name_loads_into_the_encoder():
    """Checkpoints from before agents/model/encoders hold the MultiDiscrete table as obs_embed.weight:
    policy.py renames it on loading. Without the rename, loading fails on the missing and
    unexpected keys; a rename to the wrong place would leave the fresh table."""
    torch.manual_seed(0)
    trained = Policy(MultiDiscrete(NVEC), ACTIONS, "lstm", {}, embed_dim=4)
    old = {("obs_embed.weight" if key == "encoder.embedding.weight" else key): value for key, value in trained.state_dict().items()}
    torch.manual_seed(1)
    fresh = Policy(MultiDiscrete(NVEC), ACTIONS, "lstm", {}, embed_dim=4)
    fresh.load_state_dict(old)
    assert torch.equal(fresh.encoder.embedding.weight, trained.encoder.embedding.weight)
