"""PPO (agents/learners/ppo.py, train_ppo.py): one loss path with A2C, the memory contract (acting's
log-probabilities recomputed exactly from the stored start state, minibatches of whole envs that
do not leak), exact resume, evaluate.py on its checkpoints, bad input refused naming the value."""

import dataclasses
import json
import math
import re
import typing

import pytest
import torch

import evaluate
import train_ppo
from agents.config.a2c_config import A2CConfig, resolve_config
from agents.runtime.checkpoint import load_checkpoint
from agents.learners.a2c import gae_advantages
from agents.cores import CORES
from agents.learners.ppo import PPOTrainer
from agents.config.ppo_config import PPOConfig
from agents.learners.train import Trainer
from tests.float32 import close32
from tests.trained import assert_resume_makes_the_unstopped_updates, assert_same_parameters

SMALL = {
    "feedback": {"d_model": 16, "n_layers": 2, "n_heads": 2, "span": 4},
    "transformer": {"d_model": 16, "n_layers": 2, "n_heads": 2, "span": 4},
    "reservoir": {"d_model": 16, "n_layers": 2, "n_heads": 2, "span": 4},
    "lstm": {"hidden_size": 16},
    "gru": {"hidden_size": 16},
    "mlp": {"hidden_size": 16},
    "ffm": {"d_model": 16, "memory_size": 4, "context_size": 2},
    "lru": {"d_model": 16, "state_size": 8},
    "mamba": {"d_model": 16, "d_state": 4, "n_layers": 1},
}
ENVS, STEPS = 8, 8  # rollouts of 8 steps over episodes of at most 7: episode starts inside every rollout


def small(tmp_path, core="lstm", config_class=PPOConfig, updates=2, **fields):
    given = dict(env="corridor", core=core, num_envs=ENVS, rollout=STEPS, total_steps=updates * ENVS * STEPS, seed=5,
                 run_dir=str(tmp_path), core_options=SMALL[core], env_options={"length": 3, "max_episode_steps": 7},
                 threads=1, learning_rate=1e-2, **fields)
    return resolve_config(given, config_class)


def recorded_gradients(trainer, updates: int) -> list[dict[str, torch.Tensor]]:
    """Each optimiser step's gradients, as the optimiser takes them (plain SGD)."""
    named = list(trainer.policy.named_parameters())
    trainer.optimizer = torch.optim.SGD([p for _, p in named], lr=0.1)
    taken = []
    trainer.optimizer.register_step_pre_hook(lambda *_: taken.append({n: p.grad.clone() for n, p in named}))
    for _ in range(updates):
        trainer.update()
    return taken


@pytest.mark.parametrize("core", ["lstm", "feedback"])
def test_one_epoch_of_one_minibatch_is_the_a2c_update(tmp_path, core):
    """Ratio 1, so clipping is inactive: PPO's first step is A2C's on the same advantages (the
    same GAE lambda), the value clipping inactive too, through the same loss path."""
    same = dict(gae_lambda=0.95, learner="recompute")
    gradients, weights = [], []
    # One after the other: each trainer seeds the generators, so both act the same rollout.
    for trainer_class, config in ((PPOTrainer, small(tmp_path / "ppo", core, update_epochs=1, num_minibatches=1, **same)),
                                  (Trainer, small(tmp_path / "a2c", core, config_class=A2CConfig, **same))):
        trainer = trainer_class(config)
        try:
            weights.append({name: value.clone() for name, value in trainer.policy.state_dict().items()})
            gradients.append(recorded_gradients(trainer, 1)[0])
        finally:
            trainer.close()
    assert_same_parameters(*weights)  # seeded alike
    got, want = gradients
    for name, expected in want.items():
        torch.testing.assert_close(got[name], expected, **close32(terms=16, scale=expected.abs().max().item()), msg=name)


def rollout_with_resets_inside(trainer: PPOTrainer, **keep):
    """A rollout kept as PPO keeps it (and `keep`: Actor.collect's other flags) that starts with
    memory carried from the one before and has episode starts inside it."""
    trainer.actor.collect(STEPS, keep_outputs=True, **keep)  # a first rollout: the next starts with memory
    for _ in range(5):  # the first with resets inside and memory carried in (the episodes' ends are the policy's)
        r, _ = trainer.actor.collect(STEPS, keep_outputs=True, **keep)
        if r.inputs.first[1:-1].any() and not r.inputs.first[0].all():
            break
    assert r.inputs.first[1:-1].any() and not r.inputs.first[0].all()
    return r


@pytest.mark.parametrize("core", sorted(CORES))
def test_acting_log_probabilities_and_values_are_what_the_recompute_gives(tmp_path, core):
    """The first epoch's recompute from the stored start state gives the log-probabilities and
    values acting used (ratio 1), with memory carried from the rollout before and episode starts
    inside this one."""
    trainer = PPOTrainer(small(tmp_path, core))
    try:
        trainer.policy.eval()
        r = rollout_with_resets_inside(trainer)
        with torch.no_grad():
            logits, values, _ = trainer.policy(r.inputs.steps(stop=-1), r.start_state)
        logprob = torch.log_softmax(logits, -1).gather(-1, r.action[..., None])[..., 0]
    finally:
        trainer.close()
    torch.testing.assert_close(logprob, r.logprob, **close32(terms=STEPS * 4, scale=r.logprob.abs().max().item()))
    torch.testing.assert_close(values, r.values[:-1], **close32(terms=STEPS * 4, scale=r.values.abs().max().item()))


def test_a_minibatch_reads_only_its_own_envs(tmp_path):
    """Changing env 0's rollout (its rewards, observations and actions) changes no gradient of a
    minibatch without env 0, advantage normalisation included."""
    trainer = PPOTrainer(small(tmp_path, "feedback", norm_adv=True))
    try:
        r, _ = trainer.actor.collect(STEPS, keep_outputs=True)
        others = torch.arange(1, ENVS)
        gradients = []
        parameters = [p for p in trainer.policy.parameters() if p.requires_grad]
        trainer.optimizer_step = lambda loss, stats: gradients.append(torch.autograd.grad(loss, parameters, allow_unused=True))
        for rollout in (r, changed_env_zero(r)):
            advantages = gae_advantages(rollout.reward, rollout.values, rollout.terminated, rollout.truncated, rollout.valid,
                                        trainer.config.gamma, trainer.config.gae_lambda)
            trainer.learn_minibatch(rollout, trainer.window.learning_inputs(rollout, bootstrap=False), others, advantages, advantages + rollout.values[:-1])
    finally:
        trainer.close()
    for a, b in zip(*gradients):
        assert (a is None and b is None) or torch.equal(a, b)


def changed_env_zero(r):
    """The rollout with env 0's rewards, observations and actions changed."""
    obs, reward, action = r.inputs.obs.clone(), r.reward.clone(), r.action.clone()
    obs[:, 0] = obs[:, 0].flip(0)
    reward[:, 0] += 1.0
    action[:, 0] = (action[:, 0] + 1) % 3
    return dataclasses.replace(r, inputs=dataclasses.replace(r.inputs, obs=obs), reward=reward, action=action)


def test_a_resumed_run_makes_the_updates_of_an_unstopped_one(tmp_path):
    assert_resume_makes_the_unstopped_updates(PPOTrainer, lambda folder, updates: small(tmp_path / folder, updates=updates), ENVS * STEPS)


def test_the_command_line_trains_logs_cleanrl_keys_and_evaluate_scores_it(tmp_path, capsys):
    from agents.plot_curves import read_scalars

    train_ppo.main(["--env", "corridor", "--core", "lstm", "--core-opt", "hidden_size=8", "--num-envs", "8", "--rollout", "8",
                    "--num-minibatches", "2", "--update-epochs", "2", "--total-steps", "256", "--log-every", "1",
                    "--threads", "1", "--run-dir", str(tmp_path)])
    for key in ("losses/approx_kl", "losses/clipfrac", "losses/explained_variance", "losses/entropy", "losses/epochs"):
        assert len(read_scalars(str(tmp_path), key)[0]) == 4, key  # one per update
    capsys.readouterr()
    evaluate.main([str(tmp_path), "--episodes", "4"])
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["global_step"] == 256


@pytest.mark.parametrize("flags, named", [
    (["--update-epochs", "0"], "update_epochs must be >= 1, got 0"),
    (["--num-envs", "8", "--num-minibatches", "3"], "num_minibatches (3) must divide num_envs (8)"),
    (["--clip-coef", "-0.1"], "clip_coef must be a finite number > 0, got -0.1"),
    (["--target-kl", "-1"], "target_kl must be a finite number >= 0 (0: no early stop), got -1.0"),
    (["--clip-coef", "nan"], "clip_coef must be a finite number > 0, got nan"),
    (["--target-kl", "inf"], "target_kl must be a finite number >= 0 (0: no early stop), got inf"),
    (["--learning-rate", "nan"], "learning_rate must be a finite number > 0, got nan"),
    (["--learner", "acting_graph"], "unknown learner 'acting_graph'; choose from ['recompute', 'cached_memory']"),
    (["--learner", "cached_memory"], "learner 'cached_memory' reads the memory the Feedback core wrote while acting; core 'lstm'"),
])
def test_bad_ppo_settings_are_refused_naming_them(tmp_path, flags, named, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_ppo.main(["--env", "corridor", "--core", "lstm", "--num-envs", "8", "--rollout", "4", "--total-steps", "32",
                        "--threads", "1", "--run-dir", str(tmp_path / "run"), *flags])
    assert exit_info.value.code == 2 and named in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


PPO_FLOATS = [f.name for f in dataclasses.fields(PPOConfig) if typing.get_type_hints(PPOConfig)[f.name] is float]


def test_the_ppo_float_settings_are_found():
    assert {"clip_coef", "target_kl", "gae_lambda", "learning_rate", "entropy_coef", "max_grad_norm"} <= set(PPO_FLOATS)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=repr)
@pytest.mark.parametrize("name", PPO_FLOATS)
def test_every_ppo_float_setting_refuses_nan_and_infinities_by_name(name, bad):
    """PPO's own floats and A2C's (the field list is PPOConfig's: a new float is covered as added)."""
    with pytest.raises(ValueError, match=rf"^{name} must be .*, got {re.escape(repr(bad))}$"):
        PPOConfig(**{name: bad})


def test_two_processes_make_the_updates_of_one(tmp_path):
    """torchrun, 2 processes of 4 envs each, against one process of 8: minibatches of 2 envs dealt
    over all 8 (so a process may hold none of a minibatch), advantages normalised over each whole
    minibatch, 3 updates of 2 epochs."""
    from tests.agents.test_distributed import EPS, assert_close_parameters
    from tests.launch import torchrun

    settings = dict(updates=3, update_epochs=2, num_minibatches=4, norm_adv=True, optimizer_eps=EPS)
    one = PPOTrainer(small(tmp_path / "one", **settings))
    try:
        one.train()
    finally:
        one.close()
    config = small(tmp_path / "two", **settings)
    argv = ["train_ppo.py", "--env-opt", "length=3,max_episode_steps=7", "--core-opt", "hidden_size=16", "--norm-adv"]
    argv += [f"--{key.replace('_', '-')}={getattr(config, key)}" for key in
             ("env", "core", "num_envs", "rollout", "total_steps", "seed", "threads", "learning_rate", "optimizer_eps",
              "update_epochs", "num_minibatches", "run_dir")]
    two = torchrun(2, *argv)
    assert two.returncode == 0, two.stderr[-3000:]
    saved = load_checkpoint(config.run_dir, "ppo")
    assert saved["world_size"] == 2 and saved["counters"]["updates"] == 3
    assert_close_parameters(one.policy.state_dict(), saved["policy"])


def test_the_ppo_update_runs_in_bfloat16(tmp_path):
    """--precision bf16: acting and every minibatch's recompute under bfloat16 autocast, the loss,
    weights and gradients in float32 (agents/runtime/precision.py), the core's carried state in bf16, and
    the reference point kept while acting in float32."""
    from agents.runtime.precision import autocast

    trainer = PPOTrainer(small(tmp_path, "feedback", precision="bf16"))
    try:
        trainer.train()
        assert trainer.actor.state.memory.dtype == torch.bfloat16
        assert {(p.dtype, p.grad.dtype) for p in trainer.policy.parameters()} == {(torch.float32, torch.float32)}
        with autocast(trainer.device, "bf16"):
            r, _ = trainer.actor.collect(STEPS, keep_outputs=True)
        assert r.logprob.dtype == r.values.dtype == torch.float32
    finally:
        trainer.close()
