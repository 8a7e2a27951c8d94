"""The A2C and PPO updates on the meta device, a stand-in for CUDA (see tests/cores/test_meta_device.py):
no tensor of it is made on the CPU by mistake, and nothing of it is read back to the host.

`Trainer.learn` is the update: the loss from the rollout (the graph kept while acting, or the
chunk run again), backward, clipping, the optimiser step and the encoder's running statistics.
It runs here whole. Acting runs here up to the actions: the policy's step and the sampling
(`Actor.choose`); the actions then cross to the host for the envs (`Actor._act`), the one
read-back an acting step needs, which meta cannot do (it has no values), so the rollout is
built here from the policy's outputs as `Actor.collect` builds it. The stats `learn` returns
stay on the device: logging reads them once per update, after it (Trainer.log).
"""

import pytest
import torch

from agents.config.a2c_config import resolve_config
from agents.learners.ppo import PPOTrainer
from agents.learners.rollout import Rollout
from agents.model.step_inputs import StepInputs
from agents.runtime.staging import Staging
from agents.learners.train import Trainer, build_optimizer

META = torch.device("meta")
T, B = 5, 4


def meta_trainer(tmp_path, env: str, core: str, options: dict, trainer_class=Trainer, **fields) -> Trainer:
    """A trainer built on the CPU, then its policy moved to meta with a fresh optimiser (and its
    actor's inputs staged for meta)."""
    config = resolve_config({"env": env, "core": core, "core_options": options, "num_envs": B, "rollout": T,
                             "total_steps": T * B, "seed": 1, "threads": 1, "run_dir": str(tmp_path), **fields},
                            trainer_class.config_class)
    trainer = trainer_class(config)
    trainer.policy.to(META)
    trainer.optimizer = build_optimizer(config, trainer.policy)
    trainer.learner, trainer.device, trainer.actor.device, trainer.actor.staging = trainer.policy, META, META, Staging(META)
    return trainer


def meta_rollout(trainer: Trainer) -> Rollout:
    """A rollout of T steps on meta; with the acting graph when the trainer keeps it, made a step
    at a time through Policy.open as Actor.collect makes it."""
    columns = trainer.actor.obs.shape[1]
    obs_dtype = torch.int64 if trainer.actor.obs.dtype.kind == "i" else torch.float32
    steps = lambda extra=0, dtype=torch.bool: torch.empty(T + extra, B, dtype=dtype, device=META)  # noqa: E731
    inputs = StepInputs(torch.empty(T + 1, B, columns, dtype=obs_dtype, device=META), steps(1, torch.int64),
                        steps(1, torch.float32), steps(1))  # no `starts`: meta has no values to copy to the host
    rollout = Rollout(
        inputs=inputs, valid=steps(), action=steps(0, torch.int64), reward=steps(0, torch.float32), terminated=steps(),
        truncated=steps(), start_state=trainer.policy.initial_state(B, META),
    )
    if trainer.keep_graph:
        run = trainer.policy.open(rollout.start_state, T)
        for t in range(T):
            logits, _ = run.step(inputs.steps(t, t + 1))
            assert trainer.actor.choose(logits, greedy=False).device == META
        rollout.logits, values = run.outputs()
        with torch.no_grad():
            _, bootstrap, _ = trainer.policy(inputs.steps(T), run.finish())
        rollout.values = torch.cat([values, bootstrap])
    if trainer.keeps_acting_outputs:  # PPO's reference point, as Actor.collect(keep_outputs=True) keeps it
        rollout.logprob, rollout.values = steps(0, torch.float32), steps(1, torch.float32)
    if trainer.keeps_acting_memory:  # the memory each step wrote, as Actor.collect(keep_memory=True) keeps it
        rollout.memory = torch.empty(T, B, trainer.policy.core.config.d_model, device=META)
    return rollout


def learn_on_meta(trainer: Trainer, rollout: Rollout | None = None, no_gradient: tuple[str, ...] = ()) -> None:
    """One update on `rollout` (default: meta_rollout's), its stats and gradients left on meta;
    every weight gets a gradient but those named in `no_gradient`."""
    try:
        stats = trainer.learn(meta_rollout(trainer) if rollout is None else rollout)
        assert {key: value.device for key, value in stats.items()} == {key: META for key in stats}
        weights = [(name, p) for name, p in trainer.policy.named_parameters() if p.requires_grad]
        assert [name for name, p in weights if p.grad is None] == list(no_gradient)
        assert all(p.grad.device == META for _, p in weights if p.grad is not None)
    finally:
        trainer.close()


def test_the_update_keeping_the_acting_graph_runs_on_meta(tmp_path):
    trainer = meta_trainer(tmp_path, "corridor", "feedback", {"d_model": 8, "n_heads": 2, "n_layers": 2, "span": 4})
    assert trainer.keep_graph
    learn_on_meta(trainer)


def test_the_recomputing_update_with_running_observation_statistics_runs_on_meta(tmp_path):
    """CartPole's Box observations: the encoder folds the valid steps into its running mean and
    variance after the step (a boolean mask indexed them before: a read-back on CUDA)."""
    trainer = meta_trainer(tmp_path, "CartPole-v1", "transformer", {"d_model": 8, "n_heads": 2, "n_layers": 1, "span": 4})
    assert not trainer.keep_graph and any(True for _ in trainer.policy.encoder.buffers())
    learn_on_meta(trainer)


@pytest.mark.parametrize("learner", ["recompute", "cached_memory"])
def test_the_ppo_update_runs_on_meta(tmp_path, learner):
    """Two epochs of two minibatches of whole envs, each recomputed from its envs' stored start
    state (or read from the memory acting kept), advantages normalised over the minibatch (sums
    over ranks, no read-back)."""
    trainer = meta_trainer(tmp_path, "corridor", "feedback", {"d_model": 8, "n_heads": 2, "n_layers": 2, "span": 4}, PPOTrainer,
                           update_epochs=2, num_minibatches=2, norm_adv=True, learner=learner)
    learn_on_meta(trainer, no_gradient=("core.layer_logits",) if learner == "cached_memory" else ())  # (it mixes what is written only)


@pytest.mark.parametrize("trainer_class", [Trainer, PPOTrainer])
def test_updates_with_a_gradient_window_run_on_meta(tmp_path, trainer_class):
    """--bptt 3T: the window advanced over two rollouts (its start state moved by a pass without
    gradients), then an update through the stored steps and the rollout, all on meta."""
    trainer = meta_trainer(tmp_path, "corridor", "feedback", {"d_model": 8, "n_heads": 2, "n_layers": 2, "span": 4},
                           trainer_class, bptt=3 * T, **({"num_minibatches": 2} if trainer_class is PPOTrainer else {}))
    assert not trainer.keep_graph
    for _ in range(2):
        trainer.window.advance(trainer.policy, meta_rollout(trainer))
    assert len(trainer.window) == 2 * T and trainer.window.inputs.obs.device == META
    learn_on_meta(trainer)


def test_an_acting_step_runs_on_meta_up_to_the_actions(tmp_path):
    trainer = meta_trainer(tmp_path, "corridor", "transformer", {"d_model": 8, "n_heads": 2, "n_layers": 1, "span": 4})
    try:
        state = trainer.policy.initial_state(B, META)
        with torch.no_grad():
            for _ in range(3):
                logits, _, state = trainer.policy(trainer.actor.staged()[0], state)
                for greedy in (False, True):
                    assert trainer.actor.choose(logits[0], greedy).device == META
    finally:
        trainer.close()
