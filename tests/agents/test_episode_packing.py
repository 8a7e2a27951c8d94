"""Episodes packed side by side (agents/learners/episode_packing.py): the plan puts every step back where
it was and never joins two episodes in one column; a packed call gives every core's outputs and
gradients as the unpacked call does, from a carried state; PPO's and A2C's recomputing updates
take the same gradients packed or not, cores whose steps run side by side are not packed, and a
PPO update runs packed on the meta device."""

import dataclasses
import sys
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from agents.config.a2c_config import A2CConfig
from agents.learners import episode_packing
from agents.learners.episode_packing import call_packed, pack, plan, unpack
from agents.learners.ppo import PPOTrainer
from agents.learners.train import Trainer
from agents.model.step_inputs import StepInputs
from tests.agents.test_learn_on_meta import learn_on_meta, meta_rollout, meta_trainer
from tests.agents.test_ppo import recorded_gradients, small
from tests.float32 import close32

sys.path.insert(0, str(Path(__file__).parents[1] / "cores"))
from test_interface import ATOL, INPUT_DIM, OPTIONS, cases, run  # noqa: E402

starts_arrays = st.tuples(st.integers(1, 12), st.integers(1, 5)).flatmap(lambda shape: arrays(bool, shape))


@settings(derandomize=True, max_examples=200, deadline=None)
@given(starts=starts_arrays, fixed_width=st.sampled_from([None, 0.0, 1e9]))
def test_the_plan_keeps_every_step_and_each_episode_in_one_column(starts, fixed_width):
    length, envs = starts.shape
    p = plan(starts, torch.device("cpu"), fixed_width)
    begins = starts.copy()
    begins[0] = True
    lengths = [np.diff(np.append(np.flatnonzero(begins[:, k]), length)) for k in range(envs)]
    longest, segments = max(int(np.max(each)) for each in lengths), sum(len(each) for each in lengths)
    fixed = episode_packing.FIXED_WIDTH if fixed_width is None else fixed_width
    if longest * (segments + fixed) >= length * (envs + fixed):
        assert p is None  # not cheaper by the cost model: never when a column runs whole, always without a fixed cost
        return
    assert p.steps == longest
    steps = torch.arange(length * envs).reshape(length, envs)  # each step's own number
    packed = pack(p, steps)  # (L', N)
    torch.testing.assert_close(unpack(p, packed, envs), steps)  # every step back in its place
    assert packed.shape[1] == segments == len(p.env)
    for n in range(packed.shape[1]):
        column = packed[:, n] % envs
        time = packed[:, n] // envs
        assert (column == p.env[n]).all()  # one env's steps
        real = int((torch.diff(time) == 1).sum()) + 1  # consecutive steps, then padding holding the last
        assert (time[real:] == time[real - 1]).all()
        inside = begins[time[1:real].numpy(), int(p.env[n])]
        assert not inside.any()  # no episode start after the segment's first step: episodes never share a column
        assert p.real[:, n].tolist() == [True] * real + [False] * (p.steps - real)


def as_policy(core):
    """A policy-shaped call over a core: every input reaches the outputs (`obs` is the core's input),
    those of the steps from `outputs_from` on."""
    def policy(inputs, state, outputs_from=0):
        y, state = core(inputs.obs, state, inputs.first)
        y = (y + inputs.prev_action[..., None] + inputs.prev_reward[..., None])[outputs_from:]
        return y, y.sum(-1), state
    return policy


@pytest.mark.parametrize("name", sorted(OPTIONS))
@settings(derandomize=True, max_examples=30, deadline=None)
@given(data=st.data())
def test_a_packed_call_gives_the_calls_outputs_and_gradients(name, data):
    core, x, first = data.draw(cases(name))
    first[data.draw(st.integers(0, first.shape[0] - 1)), -1] = True  # an episode start in the last env: packing applies more often
    steps, batch = first.shape
    _, state = run(core, torch.randn(3, batch, INPUT_DIM), torch.zeros(3, batch, dtype=torch.bool))  # memory carried in
    prev_action = torch.randint(0, 3, (steps, batch)).float()
    prev_reward = torch.randn(steps, batch)
    policy = as_policy(core)
    weight = torch.randn(steps, batch, core.output_dim)
    results = []
    for starts in (None, first.numpy()):
        x_in = x.clone().requires_grad_()
        with patch.object(episode_packing, "FIXED_WIDTH", 1e9):  # packed wherever that shortens the call
            logits, values = call_packed(policy, StepInputs(x_in, prev_action, prev_reward, first, starts), state)
        core.zero_grad()
        ((logits * weight).sum() + values.sum()).backward()
        results.append([logits, values, x_in.grad] + [p.grad for p in core.parameters() if p.grad is not None])
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=1e-4)


@pytest.mark.parametrize("trainer_class,core", [(PPOTrainer, "feedback"), (PPOTrainer, "lstm"), (PPOTrainer, "gru"), (Trainer, "lstm")])
def test_a_recomputing_update_takes_the_same_gradients_packed(tmp_path, monkeypatch, trainer_class, core):
    """Episodes of at most 7 steps in rollouts of 8: calls pack, and each optimiser step's
    gradients are the unpacked run's."""
    plans = []
    monkeypatch.setattr(episode_packing, "plan", lambda *args: plans.append(plan(*args)) or plans[-1])
    monkeypatch.setattr(episode_packing, "FIXED_WIDTH", 1e9)  # packed wherever that shortens the call
    gradients = []
    for packed in (False, True):
        fields = dict(pack_episodes=packed, learner="recompute")
        config = small(tmp_path / str(packed), core, **fields) if trainer_class is PPOTrainer else \
            small(tmp_path / str(packed), core, config_class=A2CConfig, **fields)
        trainer = trainer_class(config)
        try:
            gradients.append(recorded_gradients(trainer, 1))
        finally:
            trainer.close()
    unpacked, packed = gradients
    assert any(p is not None for p in plans)  # packed calls among them (a column may run whole: no start inside it)
    assert len(packed) == len(unpacked) == (24 if trainer_class is PPOTrainer else 1)  # 3 epochs of 8 minibatches, or one step
    for step, (got, want) in enumerate(zip(packed, unpacked)):
        for name, expected in want.items():
            torch.testing.assert_close(got[name], expected, **close32(terms=16, scale=expected.abs().max().item()),
                                       msg=f"step {step}, {name}")


@pytest.mark.parametrize("core", ["transformer", "mlp"])
def test_cores_whose_steps_run_side_by_side_are_not_packed(tmp_path, monkeypatch, core):
    """Packing would only pad their calls: the trainer never asks for a plan."""
    monkeypatch.setattr(episode_packing, "plan", lambda *args: pytest.fail("a plan was made"))
    trainer = PPOTrainer(small(tmp_path, core))
    try:
        assert trainer.config.pack_episodes and not trainer.packs_episodes
        trainer.update()
    finally:
        trainer.close()


def test_the_ppo_update_runs_packed_on_meta(tmp_path):
    """The plan is made on the host from the rollout's starts; the indices cross once, nothing
    is read back."""
    trainer = meta_trainer(tmp_path, "corridor", "feedback", {"d_model": 8, "n_heads": 2, "n_layers": 2, "span": 4}, PPOTrainer,
                           update_epochs=2, num_minibatches=2)
    rollout = meta_rollout(trainer)
    starts = np.zeros(tuple(rollout.inputs.first.shape), dtype=bool)
    starts[2, :] = True  # an episode start inside every env's rollout
    rollout.inputs = dataclasses.replace(rollout.inputs, starts=starts)
    assert plan(starts[:-1, :2], torch.device("meta")) is not None
    learn_on_meta(trainer, rollout)
