"""Learner settings that decide whether training moves at all: optimiser epsilon against the
gradient scale, head initialisation, the learning-rate schedule, dropout and the learner; and
every float setting finite and in range, refused by name (a NaN learning rate trains to NaN)."""

import dataclasses
import math
import re
import typing

import pytest
import torch

import envs
import train_a2c
from agents.config.a2c_config import A2CConfig, resolve_config
from agents.learners.train import Trainer

# Core sizes are the presets' own; batches are cut where the preset's would take minutes on a
# CPU (the paper's maze: 1024 x 100). A smaller batch only makes the mean gradient noisier, and so
# larger, which is why the RMSprop presets (whose epsilon is at stake) keep their envs and cut only
# the rollout, by 4 (the paper's easy maze, 3 layers of 256: 118 s -> about 30 s in the suite):
# a gradient at most twice as large, where the separation below is three orders of magnitude.
CUT_BATCH = {"num_envs": 16, "rollout": 20}
RMSPROP_ROLLOUT_CUT = 4
# RMSprop's running mean of g^2 starts at 0 without bias correction: after n updates it is
# 1 - 0.99^n of the gradients' mean square, so sqrt(v) is 0.2 of their RMS after 4 updates and
# 0.31 after 10. Ten updates keep the test short while v is no longer mostly its zero start.
UPDATES = 10
# How much of the denominator the gradient must be. The share varies with the episodes drawn: the
# LSTM's paper preset on the easy maze, seeds 0-4 of the env streams of agents/runtime/seeding.py, gave
# 0.87, 0.45, 0.49, 0.87, 0.67. The mistake this guards against, the paper's epsilon 0.01 taken
# literally on our mean losses (12,800 times the converted one), puts it near 1e-4 at those
# gradients, so a quarter separates the two by three orders of magnitude either way.
GRADIENT_SHARE = 0.25


def rms_gradient_share(trainer: Trainer) -> float:
    """Median over all weights of sqrt(v) / (sqrt(v) + eps): the share of the optimiser's
    denominator that is the gradient's running RMS rather than epsilon. Near 0, the update is
    lr * g / eps (tiny); near 1, the normalised step the optimiser is meant to take."""
    shares = []
    for group in trainer.optimizer.param_groups:
        for p in group["params"]:
            state = trainer.optimizer.state[p]
            if "square_avg" in state:  # RMSprop: no bias correction
                rms = state["square_avg"].sqrt()
            else:  # Adam: the bias-corrected second moment, as its step uses it
                rms = (state["exp_avg_sq"] / (1 - group["betas"][1] ** float(state["step"]))).sqrt()
            shares.append((rms / (rms + group["eps"])).flatten())
    return torch.cat(shares).median().item()


@pytest.mark.parametrize("preset", ["paper", "cpu"])
@pytest.mark.parametrize("env", sorted(envs.ENV_IDS))
@pytest.mark.parametrize("core", ["feedback", "lstm"])
def test_every_preset_takes_steps_set_by_the_gradient_not_by_epsilon(tmp_path, env, core, preset):
    given = dict(env=env, core=core, preset=preset, run_dir=str(tmp_path), threads=1, seed=1)
    preset_config = resolve_config(given)
    if preset_config.optimizer != "rmsprop" or (core == "feedback" and preset == "paper"):
        # Adam's epsilon (1e-8) is far from any of these gradients at any batch; the paper-sized
        # feedback core on 12,800-step batches would take a minute of this test.
        cut = CUT_BATCH
    else:
        cut = {"rollout": preset_config.rollout // RMSPROP_ROLLOUT_CUT}
    config = resolve_config({**given, **cut})
    trainer = Trainer(config)
    try:
        for _ in range(UPDATES):
            trainer.update()
        assert rms_gradient_share(trainer) > GRADIENT_SHARE, f"{config.optimizer} eps {config.optimizer_eps}"
    finally:
        trainer.close()


def test_a_fresh_policy_is_near_uniform_with_orthogonal_heads(tmp_path):
    config = resolve_config(dict(env="maze", core="feedback", preset="paper", run_dir=str(tmp_path), num_envs=32, rollout=4,
                                 head_init="orthogonal"))
    trainer = Trainer(config)
    try:
        rollout, _ = trainer.actor.collect(4)
        with torch.no_grad():
            logits, values, _ = trainer.policy(rollout.inputs, rollout.start_state)
    finally:
        trainer.close()
    top = torch.softmax(logits, -1).max(-1).values  # 3 actions: uniform is 1/3
    assert top.mean().item() < 1 / 3 + 0.01
    policy = trainer.policy
    for head, gain in ((policy.actor, 0.01), (policy.critic, 1.0)):
        rows = head.weight  # (out, hidden), out <= hidden: orthogonal rows of norm `gain`
        gram = rows @ rows.T
        torch.testing.assert_close(gram, gain**2 * torch.eye(rows.shape[0], device=rows.device), atol=1e-5 * gain**2, rtol=0)
        assert torch.count_nonzero(head.bias) == 0

    pytorch = Trainer(resolve_config(dict(env="maze", core="feedback", preset="paper", run_dir=str(tmp_path), num_envs=32,
                                          rollout=4, head_init="pytorch")))
    try:
        with torch.no_grad():
            logits, _, _ = pytorch.policy(rollout.inputs, rollout.start_state)
    finally:
        pytorch.close()
    assert torch.softmax(logits, -1).max(-1).values.mean().item() > 0.45  # the default: a confident random policy


def test_linear_schedule_anneals_to_zero_and_resumes_on_the_same_line(tmp_path):
    config = resolve_config(dict(
        env="corridor", core="mlp", num_envs=4, rollout=5, total_steps=4 * 20, learning_rate=1e-3, lr_schedule="linear",
        run_dir=str(tmp_path), core_options={"hidden_size": 8}, threads=1,
    ))
    trainer = Trainer(config)
    try:
        rates = []
        for _ in range(2):
            rates.append(trainer.learning_rate())
            trainer.update()
            assert trainer.optimizer.param_groups[0]["lr"] == rates[-1]  # the rate that step used
        trainer.save()
    finally:
        trainer.close()
    resumed = Trainer.from_checkpoint(str(tmp_path))
    try:
        assert resumed.config.lr_schedule == "linear"  # the schedule is part of the saved config
        for _ in range(2):
            rates.append(resumed.learning_rate())
            resumed.update()
    finally:
        resumed.close()
    assert rates == pytest.approx([1e-3, 0.75e-3, 0.5e-3, 0.25e-3], rel=1e-12)  # float64 arithmetic


def test_dropout_needs_a_learner_that_keeps_the_acting_graph(tmp_path):
    options = {"d_model": 16, "n_layers": 1, "n_heads": 2, "span": 4, "dropout": 0.1}
    given = dict(env="corridor", core="transformer", num_envs=2, rollout=4, run_dir=str(tmp_path), core_options=options)
    with pytest.raises(ValueError, match=r"dropout=0.1 needs a learner that keeps the acting graph"):
        Trainer(resolve_config(given))
    with pytest.raises(ValueError, match=r"dropout=0.1 needs a learner"):
        Trainer(resolve_config({**given, "core": "feedback", "learner": "recompute"}))
    trainer = Trainer(resolve_config({**given, "core": "feedback"}))  # auto keeps the feedback core's graph
    trainer.close()


def float_fields(config_class: type) -> list[str]:
    """The fields typed float: a new one is covered by the tests below as it is added."""
    hints = typing.get_type_hints(config_class)
    return [f.name for f in dataclasses.fields(config_class) if hints[f.name] is float]


def test_the_float_settings_are_found():
    assert {"learning_rate", "optimizer_eps", "gamma", "gae_lambda", "value_coef", "entropy_coef", "max_grad_norm",
            "save_every"} <= set(float_fields(A2CConfig))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=repr)
@pytest.mark.parametrize("name", float_fields(A2CConfig))
def test_every_float_setting_refuses_nan_and_infinities_by_name(name, bad):
    """`if x < 0: raise` lets NaN through (nan < 0 is False); no setting has a use for inf."""
    with pytest.raises(ValueError, match=rf"^{name} must be .*, got {re.escape(repr(bad))}$"):
        A2CConfig(**{name: bad})


@pytest.mark.parametrize("name, value, message", [
    ("learning_rate", 0.0, "learning_rate must be a finite number > 0, got 0.0"),
    ("learning_rate", -3e-4, "learning_rate must be a finite number > 0, got -0.0003"),
    ("optimizer_eps", 0, "optimizer_eps must be a finite number > 0, got 0"),
    ("save_every", 0.0, "save_every must be a finite number > 0, got 0.0"),
    ("gamma", 1.01, r"gamma must be in \[0, 1\], got 1.01"),
    ("gae_lambda", -0.1, r"gae_lambda must be in \[0, 1\], got -0.1"),
    ("value_coef", -0.5, "value_coef must be a finite number >= 0, got -0.5"),
    ("entropy_coef", -1e-4, "entropy_coef must be a finite number >= 0, got -0.0001"),
    ("max_grad_norm", -1.0, r"max_grad_norm must be a finite number >= 0 \(0: no clipping\), got -1.0"),
    ("learning_rate", "3e-4", "learning_rate must be a finite number > 0, got '3e-4'"),
    ("entropy_coef", True, "entropy_coef must be a finite number >= 0, got True"),
])
def test_float_settings_out_of_range_are_refused_by_name(name, value, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        A2CConfig(**{name: value})


def test_the_edges_of_the_ranges_are_allowed():
    config = A2CConfig(gamma=0.0, gae_lambda=1.0, value_coef=0.0, entropy_coef=0, max_grad_norm=0.0, learning_rate=1e-300)
    assert config.max_grad_norm == 0.0


TINY_RUN = ["--env", "corridor", "--num-envs", "2", "--rollout", "4", "--total-steps", "8", "--threads", "1"]


@pytest.mark.parametrize("flags, named", [
    (["--learning-rate", "inf"], "learning_rate must be a finite number > 0, got inf"),
    (["--entropy-coef", "nan"], "entropy_coef must be a finite number >= 0, got nan"),
    (["--value-coef", "nan"], "value_coef must be a finite number >= 0, got nan"),
    (["--max-grad-norm", "nan"], "max_grad_norm must be a finite number >= 0 (0: no clipping), got nan"),
    (["--gamma=-inf"], "gamma must be in [0, 1], got -inf"),  # (argparse takes a bare -inf for a flag)
    (["--save-every", "inf"], "save_every must be a finite number > 0, got inf"),
])
def test_the_command_line_refuses_non_finite_floats_exit_2_and_no_run_folder(tmp_path, capsys, flags, named):
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:  # (a tiny run, should the flag be taken: code that let NaN through trained)
        train_a2c.main([*TINY_RUN, "--core", "lstm", "--run-dir", str(run_dir), *flags])
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err
    assert not run_dir.exists()


@pytest.mark.parametrize("option, named", [
    ("dropout=nan", "dropout must be a number in [0, 1), got nan"),
    ("dropout=inf", "dropout must be a number in [0, 1), got inf"),
])
def test_the_command_line_refuses_non_finite_core_options_exit_2(tmp_path, capsys, option, named):
    """Core options are checked by the core's config as the trainer builds it (tests/cores/test_checks.py)."""
    with pytest.raises(SystemExit) as exit_info:
        train_a2c.main([*TINY_RUN, "--core", "feedback", "--core-opt", option, "--run-dir", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err
