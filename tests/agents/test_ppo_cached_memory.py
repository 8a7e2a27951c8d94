"""PPO's cached_memory learner (agents/learners/ppo.py, agents/cores/feedback/cached.py): acting
keeps the memory each step wrote; a minibatch read from it gives acting's log-probabilities and
values at the weights that acted (ratio 1); training moves every weight on the steps' path; the
settings it cannot take are refused by name."""

import pytest
import torch

from agents.learners.ppo import PPOTrainer
from tests.agents.test_ppo import ENVS, STEPS, rollout_with_resets_inside, small
from tests.float32 import close32


def test_acting_log_probabilities_and_values_are_what_the_cached_memory_gives(tmp_path):
    """The first epoch at acting's weights, from the memory acting kept, with memory carried
    from the rollout before and episode starts inside this one: the same log-probabilities and
    values, so the first ratio is 1 as with the recompute."""
    trainer = PPOTrainer(small(tmp_path, "feedback", learner="cached_memory"))
    try:
        trainer.policy.eval()
        r = rollout_with_resets_inside(trainer, keep_memory=True)
        assert r.memory.shape == (STEPS, ENVS, 16)
        with torch.no_grad():
            logits, values = trainer.policy.cached_memory_call(r.inputs.steps(stop=-1), r.start_state, r.memory)
        logprob = torch.log_softmax(logits, -1).gather(-1, r.action[..., None])[..., 0]
    finally:
        trainer.close()
    torch.testing.assert_close(logprob, r.logprob, **close32(terms=STEPS * 4, scale=r.logprob.abs().max().item()))
    torch.testing.assert_close(values, r.values[:-1], **close32(terms=STEPS * 4, scale=r.values.abs().max().item()))


def test_training_reads_the_kept_memory_and_moves_every_weight_on_the_steps_path(tmp_path):
    """Three updates of 2 epochs of 2 minibatches: the first minibatch's KL is zero (ratio 1 at
    acting's weights), the losses are finite, and every weight but the memory's layer mix moves."""
    trainer = PPOTrainer(small(tmp_path, "feedback", learner="cached_memory", update_epochs=2, num_minibatches=2, updates=3))
    try:
        before = {name: p.detach().clone() for name, p in trainer.policy.named_parameters()}
        kl = []
        learn_minibatch = trainer.learn_minibatch

        def recording(*arguments):
            stats = learn_minibatch(*arguments)
            kl.append(float(stats["approx_kl"]))
            return stats

        trainer.learn_minibatch = recording
        for _ in range(3):
            stats, _ = trainer.update()
        unmoved = sorted(name for name, p in trainer.policy.named_parameters() if torch.equal(p.detach(), before[name]))
    finally:
        trainer.close()
    assert len(kl) == 3 * 2 * 2 and abs(kl[0]) < 1e-6 and max(abs(k) for k in kl) > 1e-6  # the later minibatches moved
    assert all(torch.isfinite(torch.as_tensor(value)).all() for value in stats.values())
    assert unmoved == ["core.layer_logits"]


@pytest.mark.parametrize("fields, named", [
    (dict(core="lstm"), "learner 'cached_memory' reads the memory the Feedback core wrote while acting; core 'lstm' has none"),
    (dict(core="feedback", bptt=2 * STEPS), f"learner 'cached_memory' learns from the rollout's steps only; bptt {2 * STEPS}"),
])
def test_what_the_cached_memory_cannot_take_is_refused_naming_it(tmp_path, fields, named):
    core = fields.pop("core")
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        small(tmp_path, core, learner="cached_memory", **fields)


def test_the_cached_memory_trains_under_bfloat16(tmp_path):
    """--precision bf16: acting keeps bfloat16 memory, the minibatches read it under autocast; the
    losses stay finite and the float32 weights move."""
    trainer = PPOTrainer(small(tmp_path, "feedback", learner="cached_memory", precision="bf16", num_minibatches=2))
    try:
        before = {name: p.detach().clone() for name, p in trainer.policy.named_parameters()}
        for _ in range(2):
            stats, _ = trainer.update()
        moved = [name for name, p in trainer.policy.named_parameters() if not torch.equal(p.detach(), before[name])]
    finally:
        trainer.close()
    assert all(torch.isfinite(torch.as_tensor(value)).all() for key, value in stats.items() if key != "explained_variance")
    assert "core.kv.0.weight" in moved and "actor.weight" in moved
