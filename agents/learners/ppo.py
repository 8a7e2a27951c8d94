"""PPO for memory cores: the A2C trainer (agents/learners/train.py) with a clipped, multi-epoch update.

The memory contract, which recurrent PPO implementations often leave implicit:

- Acting keeps each env's core state at the start of the rollout (`Rollout.start_state`), and
  each step's log-probability of the action taken and value (the reference point pi_old, V_old)
  and the bootstrap value after the last step (Actor.collect(keep_outputs=True)).
- Every epoch deals the envs into `num_minibatches` minibatches of whole envs. Each minibatch is
  recomputed over the whole rollout from those envs' stored start state with the current weights,
  episode starts inside the rollout honoured by `first` (memory is reset there): full truncated
  BPTT over the rollout, no stale states. The episodes inside it run side by side
  (agents/learners/episode_packing.py: the same outputs in fewer sequential steps; --no-pack-episodes
  runs each env's column whole). With --bptt K > T each minibatch starts K
  steps back instead (agents/learners/window.py): the window's history before the rollout is a burn-in that
  carries gradient, its outputs no loss. One minibatch's loss reads only its own
  envs, so changing one env's rollout changes no other env's gradient.
- `--learner cached_memory` (the Feedback core) is CleanRL ppo_trxl's contract instead: acting
  also keeps the memory vector each step wrote (`Rollout.memory`), and a minibatch runs all its
  steps at once, each reading its window of that memory with the current weights
  (agents/cores/feedback/cached.py). No gradient reaches the memory, so the core cannot learn
  to write what a later step needs; the steps no longer wait on one another.
- The Feedback core's recompute is its fused forward and hand-written backward (no autograd graph
  per step), as in A2C's recompute learner; the extra epochs cost what its learning pass costs.
- The loss is A2C's (agents/learners/a2c.py:a2c_loss) with PPO's `Clip`: at the first minibatch of the
  first epoch the ratio is 1 and the gradient is A2C's policy gradient on the same advantages.

Logged under CleanRL's keys: losses/approx_kl, losses/clipfrac, losses/explained_variance,
losses/entropy (means over the update's minibatches), and losses/epochs (how many ran, fewer
when --target-kl stopped them). Under torchrun the envs of all processes are dealt into
minibatches with the generator the ranks share, each rank recomputes its own envs of each, and
the gradients, losses, counts and advantage moments are summed over ranks: two processes make the
updates of one process holding all the envs.
"""

from __future__ import annotations

import torch

from agents.runtime import distributed
from agents.learners.a2c import Clip, a2c_loss, gae_advantages
from agents.config.ppo_config import PPOConfig
from agents.runtime.precision import autocast
from agents.learners.rollout import Rollout
from agents.learners.train import Trainer
from agents.learners.window import WindowInputs

KIND = "ppo"


def normalised(advantages: torch.Tensor, valid: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Advantages scaled to mean 0 and standard deviation 1 over the valid steps of the whole
    minibatch, every rank's part of it (`count` its valid steps; weighted, not indexed: no host
    synchronisation; an empty part takes part in the sums)."""
    weight = valid.to(advantages.dtype)
    moments = distributed.sum_tensor(torch.stack([(advantages * weight).sum(), (advantages.square() * weight).sum()]),
                                     "summing the advantages' moments")
    count = count.clamp(min=1.0)
    mean = moments[0] / count
    std = (moments[1] / count - mean.square()).clamp(min=0.0).sqrt()
    return (advantages - mean) / (std + 1e-8) * weight


class PPOTrainer(Trainer):
    kind = KIND
    config_class = PPOConfig
    script = "train_ppo.py"
    keeps_acting_outputs = True

    @property
    def keeps_acting_memory(self) -> bool:
        return self.config.learner == "cached_memory"
    sums_gradients = True  # a rank may hold none of a minibatch's envs, which DDP cannot take

    def learn(self, r: Rollout) -> dict[str, float]:
        c = self.config
        old_values = r.values  # (T + 1, B) float32, the bootstrap value last
        advantages = gae_advantages(r.reward, old_values, r.terminated, r.truncated, r.valid, c.gamma, c.gae_lambda)
        returns = advantages + old_values[:-1]
        inputs = self.window.learning_inputs(r, bootstrap=False)  # the window's history (a burn-in with gradients), then T
        first, last = self.first_env, self.first_env + r.action.shape[1]  # this rank's envs among all
        totals: dict[str, torch.Tensor] = {}
        minibatches = 0
        epochs = 0
        for _ in range(c.update_epochs):
            epochs += 1
            kl = []
            # Dealt over every process's envs with the generator all ranks share (seeded alike), so
            # the minibatches are one process's; each rank takes its own envs of each.
            for dealt in torch.randperm(c.num_envs).chunk(c.num_minibatches):
                index = dealt[(dealt >= first) & (dealt < last)] - first  # on the host
                stats = self.learn_minibatch(r, inputs, index, advantages, returns)
                kl.append(stats["approx_kl"])
                for key, value in stats.items():
                    totals[key] = totals.get(key, 0.0) + value.detach()
                minibatches += 1
            if c.target_kl > 0 and float(torch.stack(kl).mean()) > c.target_kl:  # the epoch's mean over minibatches
                break
        self.observe(r)
        stats = {key: value / minibatches for key, value in totals.items()}
        stats["epochs"] = torch.full((), float(epochs), device=self.device)
        return stats

    def learn_minibatch(self, r: Rollout, inputs: WindowInputs, index: torch.Tensor, advantages: torch.Tensor,
                        returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """One optimiser step on this rank's envs `index` ((K,) on the host) of a minibatch: the
        whole rollout of those envs (after the window's history, `inputs`) recomputed from
        their stored start state with the current weights, episodes packed side by side where
        that pays. With K = 0 the rank adds nothing but takes part in the step."""
        c = self.config
        on_device = index.to(self.device)
        pick = lambda tensor: tensor[:, on_device]  # noqa: E731  (T, B, ...) -> (T, K, ...)
        # Every rank makes the same collectives in the same order, an empty part included.
        valid = pick(r.valid)
        count = distributed.sum_tensor(valid.sum().to(torch.float32), "counting valid steps")  # the minibatch's, over all ranks
        advantage = normalised(pick(advantages), valid, count) if c.norm_adv else pick(advantages)
        if len(index):
            w = inputs.select(index, on_device)
            with autocast(self.device, c.precision):
                if c.learner == "cached_memory":  # no history: the window is refused with it (PPOConfig)
                    logits, values = self.learner.cached_memory_call(w.inputs, w.start_state, r.memory[:, on_device])
                else:
                    logits, values = w.call(self.learner, self.packs_episodes)
            clip = Clip(pick(r.logprob), pick(r.values[:-1]), c.clip_coef, c.clip_vloss)
            loss, stats = a2c_loss(logits.float(), values.float(), pick(r.action), advantage, pick(returns), valid,
                                   c.value_coef, c.entropy_coef, count, clip)
        else:
            loss = None
            stats = {key: torch.zeros((), device=self.device) for key in ("approx_kl", "clipfrac", "policy_loss", "value_loss", "entropy")}
            stats["explained_variance"] = torch.full((), float("nan"), device=self.device)
        # Sums over this rank's steps / count, as the loss parts: summed over ranks, the whole minibatch's.
        stats["approx_kl"], stats["clipfrac"] = distributed.sum_tensor(torch.stack([stats["approx_kl"], stats["clipfrac"]]), "summing the KL")
        self.optimizer_step(loss, stats)
        return stats
