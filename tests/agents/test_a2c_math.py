"""Advantages and the loss against hand-computed cases."""

import math

import torch

from agents.learners.a2c import a2c_loss, explained_variance, gae_advantages
from tests.float32 import approx32

G = 0.9
# Advantages are float32 recursions over at most 4 steps of numbers up to 10 (tests/float32.py).
STEPS, SIZE = 4, 10.0


def advantages(rewards, values, terminated, truncated, valid, lam=1.0):
    as_tensor = lambda rows, dtype: torch.tensor(rows, dtype=dtype).reshape(len(rows), 1)  # noqa: E731
    return gae_advantages(
        as_tensor(rewards, torch.float32),
        as_tensor(values, torch.float32),
        as_tensor(terminated, torch.bool),
        as_tensor(truncated, torch.bool),
        as_tensor(valid, torch.bool),
        G,
        lam,
    )[:, 0].tolist()


def test_no_episode_end_is_the_n_step_return_minus_the_value():
    # rewards 1, 2, 3; values 0.5, 0.25, 0.75; bootstrap 2.0
    got = advantages([1, 2, 3], [0.5, 0.25, 0.75, 2.0], [0, 0, 0], [0, 0, 0], [1, 1, 1])
    want = [
        1 + G * 2 + G**2 * 3 + G**3 * 2.0 - 0.5,
        2 + G * 3 + G**2 * 2.0 - 0.25,
        3 + G * 2.0 - 0.75,
    ]
    assert got == approx32(want, STEPS, SIZE)


def test_termination_does_not_bootstrap_and_cuts_the_sum():
    # step 1 terminates; step 2 shows the last observation (not valid); step 3 is a new episode.
    got = advantages([1, 5, 0, 2], [0.5, 0.25, 9.0, 0.1, 3.0], [0, 1, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1])
    want = [1 + G * 5 - 0.5, 5 - 0.25, 0.0, 2 + G * 3.0 - 0.1]
    assert got == approx32(want, STEPS, SIZE)


def test_truncation_bootstraps_from_the_last_observation():
    # step 1 is cut by the time limit: bootstrap from V(last observation) = 9.0, the value at step 2.
    got = advantages([1, 5, 0, 2], [0.5, 0.25, 9.0, 0.1, 3.0], [0, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 1])
    want = [1 + G * (5 + G * 9.0) - 0.5, 5 + G * 9.0 - 0.25, 0.0, 2 + G * 3.0 - 0.1]
    assert got == approx32(want, STEPS, SIZE)


def test_truncation_at_the_rollout_end_bootstraps_from_the_extra_value():
    got = advantages([1, 5], [0.5, 0.25, 9.0], [0, 0], [0, 1], [1, 1])
    assert got == approx32([1 + G * (5 + G * 9.0) - 0.5, 5 + G * 9.0 - 0.25], STEPS, SIZE)


def test_lambda_zero_is_one_step_td():
    got = advantages([1, 2], [0.5, 0.25, 2.0], [0, 0], [0, 0], [1, 1], lam=0.0)
    assert got == approx32([1 + G * 0.25 - 0.5, 2 + G * 2.0 - 0.25], STEPS, SIZE)


def test_gae_mixes_td_errors_by_lambda():
    lam = 0.5
    got = advantages([1, 2], [0.5, 0.25, 2.0], [0, 0], [0, 0], [1, 1], lam=lam)
    d0, d1 = 1 + G * 0.25 - 0.5, 2 + G * 2.0 - 0.25
    assert got == approx32([d0 + G * lam * d1, d1], STEPS, SIZE)


def test_loss_parts_by_hand():
    logits = torch.log(torch.tensor([[[0.25, 0.75]], [[0.5, 0.5]], [[0.9, 0.1]]]))  # (T=3, B=1, A=2)
    values = torch.tensor([[1.0], [2.0], [5.0]], requires_grad=True)
    actions = torch.tensor([[1], [0], [0]])
    advantages_ = torch.tensor([[2.0], [-1.0], [7.0]])
    returns = torch.tensor([[3.0], [1.0], [0.0]])
    valid = torch.tensor([[True], [True], [False]])  # the third step carries no loss
    loss, stats = a2c_loss(logits, values, actions, advantages_, returns, valid, value_coef=0.5, entropy_coef=0.1)
    policy = -(math.log(0.75) * 2.0 + math.log(0.5) * -1.0) / 2
    value = 0.5 * ((1 - 3) ** 2 + (2 - 1) ** 2) / 2
    entropy = (-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)) + math.log(2)) / 2
    # float32 means of 2 valid steps over 2 actions, of parts up to 2.5 that cancel in the loss
    assert stats["policy_loss"].item() == approx32(policy, terms=4, scale=2.5)
    assert stats["value_loss"].item() == approx32(value, terms=4, scale=2.5)
    assert stats["entropy"].item() == approx32(entropy, terms=4, scale=2.5)
    assert loss.item() == approx32(policy + 0.5 * value - 0.1 * entropy, terms=4, scale=2.5)
    loss.backward()
    assert values.grad[2, 0] == 0.0  # nothing flows from the invalid step
    assert values.grad[0, 0].item() == approx32(0.5 * (1 - 3) / 2, terms=2)


def test_explained_variance():
    target = torch.tensor([1.0, 2.0, 3.0, 4.0])
    mask = torch.ones(4, dtype=torch.bool)
    # float32 variances over 4 values: near zero only an absolute tolerance means anything
    assert explained_variance(target, target, mask).item() == approx32(1.0, terms=4)
    assert explained_variance(torch.full((4,), 2.5), target, mask).item() == approx32(0.0, terms=4)
