"""The policy's step inputs as one record (agents/model/step_inputs.py): whatever is done to the
steps keeps `starts` equal to `first`, the host copy never moves to the device, a rollout's
starts are its first, and parts that do not line up (or a policy run fed more than a step) are
refused naming their shapes."""

import numpy as np
import pytest
import torch

from gymnasium.spaces import MultiDiscrete

from agents.config.a2c_config import resolve_config
from agents.learners.train import Trainer
from agents.model.policy import Policy
from agents.model.step_inputs import StepInputs

L, B, N = 6, 5, 3


def record(seed: int = 0, steps: int = L) -> StepInputs:
    generator = torch.Generator().manual_seed(seed)
    first = torch.rand(steps, B, generator=generator) < 0.3
    return StepInputs(torch.randint(0, 3, (steps, B, N), generator=generator), torch.randint(0, 4, (steps, B), generator=generator),
                      torch.rand(steps, B, generator=generator), first, first.numpy().copy())


def assert_in_step(inputs: StepInputs) -> None:
    assert inputs.starts is not None and (inputs.starts == inputs.first.numpy()).all()


def test_cutting_choosing_and_joining_keep_starts_equal_to_first():
    inputs = record()
    index = torch.tensor([3, 0, 4])  # out of order: the envs come back in this order
    chosen = inputs.select_envs(index, index)
    assert_in_step(chosen)
    assert torch.equal(chosen.obs, inputs.obs[:, index]) and chosen.first.shape == (L, 3)
    for cut in (inputs.steps(stop=-1), inputs.steps(start=2), inputs.steps(1, 4)):
        assert_in_step(cut)
    joined = StepInputs.cat([inputs.steps(start=2), record(seed=1, steps=4), inputs.steps(stop=1)])
    assert_in_step(joined)
    assert len(joined) == L - 2 + 4 + 1


def test_joining_a_part_without_starts_drops_them_rather_than_misplace_them():
    inputs = record()
    assert StepInputs.cat([inputs, StepInputs(inputs.obs, inputs.prev_action, inputs.prev_reward, inputs.first)]).starts is None


def test_moving_keeps_starts_on_the_host():
    moved = record().to("meta")
    assert moved.first.device == torch.device("meta") and isinstance(moved.starts, np.ndarray)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(starts=np.zeros((L, B + 1), dtype=bool)), r"starts must be first's values on the host, bool of shape \(6, 5\); got bool of shape \(6, 6\)"),
        (dict(starts=np.zeros((L, B), dtype=np.int64)), r"starts must be first's values on the host, bool of shape \(6, 5\); got int64 of shape \(6, 5\)"),
        (dict(obs=torch.zeros(L - 1, B, N)), r"obs has shape \(5, 5, 3\), but first has \(6, 5\): every input begins \(steps, envs\)"),
        (dict(prev_action=torch.zeros(L, B + 1)), r"prev_action has shape \(6, 6\), but first has \(6, 5\)"),
        (dict(first=torch.zeros(B, dtype=torch.bool)), r"first must be \(steps, envs\), got shape \(5,\)"),
    ],
)
def test_parts_that_do_not_line_up_are_refused_naming_their_shapes(change, message):
    inputs = record()
    given = {**dict(obs=inputs.obs, prev_action=inputs.prev_action, prev_reward=inputs.prev_reward, first=inputs.first,
                    starts=inputs.starts), **change}
    with pytest.raises(ValueError, match=message):
        StepInputs(**given)


def test_a_policy_run_takes_one_step_at_a_time():
    policy = Policy(MultiDiscrete([3] * N), 3, "lstm", {"hidden_size": 4})
    run = policy.open(policy.initial_state(B, "cpu"), L)
    logits, values = run.step(record().steps(0, 1))
    assert logits.shape == (B, 3) and values.shape == (B,)
    with pytest.raises(ValueError, match="a policy run takes one step at a time, got 2 steps"):
        run.step(record().steps(1, 3))


def test_a_rollouts_starts_are_its_first_on_the_host(tmp_path):
    """Episodes of at most 7 steps in rollouts of 8: starts inside some rollout, kept in step by the actor."""
    config = resolve_config(dict(env="corridor", core="lstm", num_envs=4, rollout=8, total_steps=64, seed=3, threads=1,
                                 run_dir=str(tmp_path), core_options={"hidden_size": 8},
                                 env_options={"length": 3, "max_episode_steps": 7}))
    trainer = Trainer(config)
    try:
        rollouts = [trainer.actor.collect(8)[0] for _ in range(3)]
    finally:
        trainer.close()
    for rollout in rollouts:
        assert_in_step(rollout.inputs)
        assert len(rollout.inputs) == 9  # T steps and the observation after them
    assert any(rollout.inputs.starts[1:-1].any() for rollout in rollouts)
