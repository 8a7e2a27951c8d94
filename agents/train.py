"""The A2C training loop: act, learn, log, checkpoint; resumable exactly.

`Trainer(config)` builds the env pool, the policy on the learner device and the optimiser;
`Trainer.from_checkpoint(run_dir)` rebuilds one from a saved run. `train()` loops until
`total_steps` frames: collect T steps of B envs (agents/rollout.py), get the rollout's logits and
values with gradients, take one optimiser step, log. The gradients come from the graph kept
while acting (feedback: its steps are sequential anyway, so acting is the learning pass's
forward), or from running the policy over the chunk again from the rollout's starting core state
(the others: acting then runs without gradients); `learner` in the config chooses, `auto` the
faster as measured by benchmarks/a2c.py (see KEEPS_ACTING_GRAPH). Checkpoints hold everything
the next update depends on (weights, optimiser, counters, random generators, the envs, the core
state and the actor's carry), so a resumed run makes the same updates as one never stopped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.a2c import a2c_loss, gae_advantages
from agents.a2c_config import KEEPS_ACTING_GRAPH, A2CConfig
from agents.actors import ActorError, make_env_pool
from agents.checkpoint import CheckpointError, checkpoint_path, load_checkpoint, save_checkpoint
from agents.cores.state import move_state
from agents.device import resolve_device
from agents.interrupt import StopOnInterrupt
from agents.policy import Policy
from agents.rollout import Actor, Episodes, Rollout
from agents.seeding import rng_states, seed_everything, set_rng_states

KIND = "a2c"
RECENT_EPISODES = 100  # the progress bar's mean return is over this many last episodes


def build_policy(config: A2CConfig, obs_space: gym.Space, num_actions: int) -> Policy:
    return Policy(obs_space, num_actions, config.core, config.core_options, config.embed_dim, config.head_init,
                  config.previous_inputs)


def build_optimizer(config: A2CConfig, policy: Policy) -> torch.optim.Optimizer:
    parameters = [p for p in policy.parameters() if p.requires_grad]
    if config.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=config.learning_rate, eps=config.optimizer_eps)
    return torch.optim.RMSprop(parameters, lr=config.learning_rate, eps=config.optimizer_eps)


class Trainer:
    def __init__(self, config: A2CConfig):
        self.config = config
        self.device = resolve_device(config.device)
        if config.threads:
            torch.set_num_threads(config.threads)
        seed_everything(config.seed)
        self.pool = make_env_pool(config.env, config.num_envs, config.seed, config.num_actors, config.env_options)
        try:
            self.policy = build_policy(config, self.pool.observation_space, self.pool.num_actions).to(self.device)
            self.optimizer = build_optimizer(config, self.policy)
            self.keep_graph = config.learner == "acting_graph" or (config.learner == "auto" and config.core in KEEPS_ACTING_GRAPH)
            if self.keep_graph and not self.policy.can_open:
                raise ValueError(f"learner 'acting_graph' needs a core fed one step at a time (feedback, lstm); {config.core!r} is not")
            dropout = config.core_options.get("dropout", 0.0)
            if dropout > 0 and not self.keep_graph:
                # Recomputing, acting runs without dropout and learning with it (other masks), so
                # the policy that acted is not the one whose gradient is taken.
                raise ValueError(
                    f"dropout={dropout} needs a learner that keeps the acting graph (--learner acting_graph, "
                    f"cores feedback or lstm), so acting and learning use the same masks; use --core-opt dropout=0 otherwise"
                )
            self.actor = Actor(self.pool, self.policy, self.device)
        except BaseException:
            self.pool.close()
            raise
        self.updates = 0
        self.global_step = 0
        self.episodes = 0
        self.recent_returns: list[float] = []

    # ---------------------------------------------------------------- learning

    def update(self) -> tuple[dict[str, float], Episodes]:
        """Collect one rollout and take one optimiser step on it."""
        c = self.config
        self.policy.train(self.keep_graph)  # acting is the learning pass, or dropout (if any) is off
        rollout, episodes = self.actor.collect(c.rollout, self.keep_graph)
        self.policy.train()
        stats = self.learn(rollout)
        self.updates += 1
        self.global_step += c.rollout * c.num_envs
        self.episodes += len(episodes)
        return stats, episodes

    def learn(self, r: Rollout) -> dict[str, float]:
        c = self.config
        if r.logits is None:  # T + 1 steps: the last gives the bootstrap value
            logits, values, _ = self.policy(r.obs, r.prev_action, r.prev_reward, r.first, r.start_state)
            logits = logits[:-1]
        else:
            logits, values = r.logits, r.values
        advantages = gae_advantages(r.reward, values, r.terminated, r.truncated, r.valid, c.gamma, c.gae_lambda)
        returns = advantages + values[:-1].detach()
        loss, stats = a2c_loss(logits, values[:-1], r.action, advantages, returns, r.valid, c.value_coef, c.entropy_coef)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c.max_grad_norm > 0:
            stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), c.max_grad_norm)
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate()
        self.optimizer.step()
        # After the step, so acting on this rollout and learning from it saw the same statistics.
        self.policy.observe(r.obs[:-1][r.valid])
        return stats

    def learning_rate(self) -> float:
        """This update's learning rate: constant, or annealed linearly from the configured one to
        0 at total_steps (as TorchBeast and CleanRL do), from the frames trained before it. It
        depends on the counters only, so a resumed run continues the same schedule (unless
        --total-steps changes on resume, which stretches the rest of it)."""
        c = self.config
        if c.lr_schedule == "constant":
            return c.learning_rate
        return c.learning_rate * max(0.0, 1.0 - self.global_step / c.total_steps)

    # ---------------------------------------------------------------- checkpoints

    def state_dict(self, with_envs: bool = True) -> dict[str, Any]:
        """Everything a resumed run needs. Without the envs (a worker died), resuming starts
        fresh episodes."""
        return {
            "config": self.config.to_dict(),
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "counters": {"updates": self.updates, "global_step": self.global_step, "episodes": self.episodes},
            "recent_returns": list(self.recent_returns),
            "rng": rng_states(),
            "envs": {"shards": self.pool.num_shards, "state": self.pool.get_state()} if with_envs else None,
            "actor": self.actor.carry() if with_envs else None,
        }

    def save(self, with_envs: bool = True) -> Path:
        return save_checkpoint(checkpoint_path(self.config.run_dir), KIND, self.state_dict(with_envs))

    @classmethod
    def from_checkpoint(cls, run_dir_or_file: str, overrides: dict[str, Any] | None = None) -> "Trainer":
        """Rebuild a run from its checkpoint, in the checkpoint's folder (a moved run folder
        stays where it is); `overrides` may change only fields that do not change what is
        learned (RESUMABLE_OVERRIDES)."""
        payload = load_checkpoint(run_dir_or_file, KIND)
        overrides = overrides or {}
        bad = sorted(set(overrides) - RESUMABLE_OVERRIDES)
        if bad:
            raise CheckpointError(f"cannot change {bad} when resuming; only {sorted(RESUMABLE_OVERRIDES)} may change")
        # The run continues in the folder its checkpoint was read from, wherever it was first made.
        run_dir = str(checkpoint_path(run_dir_or_file).parent)
        try:
            config = A2CConfig(**{**payload["config"], **overrides, "run_dir": run_dir})
        except TypeError as error:
            raise CheckpointError(f"checkpoint config does not match this version: {error}") from error
        trainer = cls(config)
        try:
            trainer.load_state_dict(payload)
        except BaseException:
            trainer.close()
            raise
        return trainer

    def load_state_dict(self, payload: dict[str, Any]) -> None:
        try:
            self.policy.load_state_dict(payload["policy"])
            self.optimizer.load_state_dict(payload["optimizer"])
        except (RuntimeError, ValueError, KeyError) as error:
            raise CheckpointError(f"checkpoint does not fit this model: {error}") from error
        counters = payload["counters"]
        self.updates, self.global_step, self.episodes = counters["updates"], counters["global_step"], counters["episodes"]
        self.recent_returns = list(payload["recent_returns"])
        set_rng_states(payload["rng"])
        saved_envs = payload["envs"]
        shards = self.pool.num_shards
        if saved_envs is not None and saved_envs["shards"] == shards:
            self.pool.set_state(saved_envs["state"])
            carry = dict(payload["actor"])
            carry["state"] = move_state(carry["state"], self.device)
            self.actor.load_carry(carry)
            self.resumed_how = "envs and memory continue where they were"
        else:
            why = "the checkpoint has no env state" if saved_envs is None else f"env shards differ ({saved_envs['shards']} saved, {shards} now)"
            self.pool.seed = self.config.seed + self.global_step  # fresh episodes, not a replay of the first ones
            self.actor.restart()
            self.resumed_how = f"clean episode restart: {why}"

    def close(self) -> None:
        self.pool.close()

    # ---------------------------------------------------------------- the loop

    def train(self) -> None:
        """Train to total_steps with logging and checkpoints; always saves on the way out.

        The first Ctrl-C anywhere in here (opening the log too) lets the update under way
        finish, saves, then raises KeyboardInterrupt; a second one stops at once."""
        c = self.config
        interrupt = StopOnInterrupt()
        with interrupt:
            run_dir = Path(c.run_dir)
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "config.json").write_text(json.dumps(c.to_dict(), indent=2) + "\n")
            # A checkpoint is written after its update's logs, so a resumed run drops only what was
            # logged after it: steps beyond global_step (the last saved update logged at it).
            writer = SummaryWriter(str(run_dir), purge_step=self.global_step + 1 if self.global_step else None)
            if self.global_step == 0:
                writer.add_text("config", "```\n" + json.dumps(c.to_dict(), indent=2) + "\n```")
            bar = tqdm(total=c.total_steps, initial=self.global_step, unit="frame", unit_scale=True, dynamic_ncols=True)
            with_envs = True
            try:
                self._loop(writer, bar, interrupt)
            except (ActorError, KeyboardInterrupt):
                # A dead worker's envs cannot be saved; after a second Ctrl-C the workers may be
                # mid-command. Either way the checkpoint keeps the rest, and resuming restarts episodes.
                with_envs = False
                raise
            finally:
                bar.close()
                path = self.save(with_envs)
                writer.close()
                tqdm.write(f"checkpoint: {path} (step {self.global_step:,})")
        if interrupt.requested:
            raise KeyboardInterrupt

    def _loop(self, writer: SummaryWriter, bar: tqdm, interrupt: "StopOnInterrupt") -> None:
        """Update, log and checkpoint every save_every seconds until done or asked to stop."""
        c = self.config
        last_save = time.monotonic()
        while self.global_step < c.total_steps and not interrupt.requested:
            started = time.perf_counter()
            stats, episodes = self.update()
            frames_per_second = c.rollout * c.num_envs / (time.perf_counter() - started)
            self.log(writer, stats, episodes, frames_per_second)
            bar.update(c.rollout * c.num_envs)
            mean_return = np.mean(self.recent_returns) if self.recent_returns else float("nan")
            bar.set_postfix(SPS=f"{frames_per_second:,.0f}", ret=f"{mean_return:.3f}", refresh=False)
            if time.monotonic() - last_save >= c.save_every:
                self.save()
                last_save = time.monotonic()

    def log(self, writer: SummaryWriter, stats: dict[str, torch.Tensor], episodes: Episodes, frames_per_second: float) -> None:
        step = self.global_step
        if len(episodes):
            for key, values in episodes.values.items():
                name = {"return": "episodic_return", "length": "episodic_length"}.get(key, key)
                writer.add_scalar(f"charts/{name}", float(np.mean(values)), step)
            self.recent_returns = (self.recent_returns + episodes.values["return"])[-RECENT_EPISODES:]
        writer.add_scalar("charts/SPS", frames_per_second, step)
        if self.updates % self.config.log_every == 0:
            writer.add_scalar("charts/learning_rate", self.optimizer.param_groups[0]["lr"], step)
            for key, value in stats.items():
                writer.add_scalar(f"losses/{key}", float(value), step)
            if hasattr(self.policy.core, "layer_weights"):
                for layer, weight in enumerate(self.policy.core.layer_weights.detach().cpu().tolist()):
                    writer.add_scalar(f"feedback/layer_weight_{layer}", weight, step)


RESUMABLE_OVERRIDES = {"total_steps", "num_actors", "device", "threads", "save_every", "log_every"}

