"""The recurrent DQN's loop: act with epsilon-greedy, store sequences, learn from replayed batches.

`DQNTrainer` is agents/learners/train.py's Trainer (the env pool and actor workers, the policy and
its core, the optimiser, TensorBoard, the solve check, checkpoints, stop signals, the run folder)
with its own update:

1. act `rollout` steps of every env with epsilon from the schedule (agents/learners/dqn/epsilon.py),
   cutting the steps into whole episodes or R2D2 segments (sequences.py) that go into the replay;
2. once `learning_starts` frames were acted, take `updates_per_step` optimiser steps per frame
   acted (the fraction carried over), each on `batch_size` sequences drawn from the replay: the
   online network replayed from each sequence's start state (after a burn-in for segments), the
   n-step double-DQN target from the target network (loss.py, targets.py), the gradient clipped
   as A2C's; after every `target_every` steps the target network moves by `tau` (target_network.py).

Resuming is exact: the checkpoint holds what A2C's does (weights, optimiser, counters, random
generators, envs, the actor's carry) and the target network and counters of its own, and the
replay (its sequences and the cutter's unfinished ones) is an .npz beside it that the checkpoint
names (replay.py: two files in turn, so a kill -9 at any moment leaves a checkpoint and its replay).
One process only: torchrun is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.config.dqn_config import DQNConfig
from agents.learners.dqn.acting import EpsilonGreedyActor
from agents.learners.dqn.epsilon import epsilon
from agents.learners.dqn.loss import Batch, td_loss
from agents.learners.dqn.replay import FILES, ReplayBuffer, ReplayError, replay_slots
from agents.learners.dqn.sequences import EpisodeCutter, SegmentCutter, state_arrays, step_dtypes
from agents.learners.dqn.target_network import update_target
from agents.learners.rollout import Episodes
from agents.learners.train import Trainer, build_policy
from agents.model.step_inputs import StepInputs
from agents.runtime.checkpoint import CheckpointError
from agents.runtime.checkpoint_fields import check_number, restore
from agents.runtime.observations import compact_dtype, flat_dtype, flat_size
from agents.runtime.precision import autocast

KIND = "dqn"


class DQNTrainer(Trainer):
    kind = KIND
    config_class = DQNConfig
    script = "train_dqn.py"

    def __init__(self, config: DQNConfig):
        super().__init__(config)
        try:
            self._build_learner()
        except BaseException:
            self.pool.close()
            raise

    def _build_learner(self) -> None:
        c = self.config
        if self.world.size > 1:
            raise ValueError(f"train_dqn.py runs in one process; this is one of {self.world.size} (torchrun): run it without torchrun")
        space, num_actions = self.pool.observation_space, self.pool.num_actions
        self.longest_episode = self.pool.longest_episode
        mode = c.replay if c.replay != "auto" else ("episodes" if self.longest_episode else "segments")
        if mode == "episodes" and not self.longest_episode:
            raise ValueError(f"--replay episodes stores whole episodes, and env {c.env!r} does not bound their length; "
                             f"use --replay segments (or auto), or give the env a time limit")
        self.segments = mode == "segments"
        self.burn_in = c.burn_in if self.segments else 0
        length = c.burn_in + c.segment_length + c.n_step if self.segments else self.longest_episode + 1
        epsilon(c.epsilon_schedule, 0, c.total_steps, c.epsilon_start, c.epsilon_end, c.epsilon_fraction, self.longest_episode)
        columns, dtypes = flat_size(space), step_dtypes(compact_dtype(space), num_actions)
        self.obs_dtype = flat_dtype(space)
        template = self.policy.initial_state(1, self.device)
        self.stored_state = self.segments and c.segment_state == "stored"
        states = {name: values.shape[1:] for name, values in state_arrays(template, c.core).items()} if self.stored_state else {}
        slots = replay_slots(c.replay_capacity, length, c.replay_sequences, c.batch_size)
        self.replay = ReplayBuffer(slots, length, columns, dtypes, states, f"{mode} of env {c.env!r}")
        if self.segments:
            self.cutter = SegmentCutter(len(self.own_envs), length, c.segment_length, columns, dtypes, c.core, self.stored_state)
        else:
            self.cutter = EpisodeCutter(len(self.own_envs), length, columns, dtypes)
        self.state_template = template
        self.actor = EpsilonGreedyActor(self.pool, self.policy, self.device, (self.first_env, c.num_envs))
        self.target = build_policy(c, space, num_actions).to(self.device)
        self.target.load_state_dict(self.policy.state_dict())
        self.target.requires_grad_(False)
        self.gradient_steps = 0
        self.update_credit = 0.0  # optimiser steps owed (its fraction carried to the next phase)
        self.replay_file: str | None = None  # the replay file the last checkpoint names
        self.observes = any(True for _ in self.policy.encoder.buffers())

    @property
    def replay_mode(self) -> str:
        return "segments" if self.segments else "episodes"

    def epsilon(self) -> float:
        c = self.config
        return epsilon(c.epsilon_schedule, self.global_step, c.total_steps, c.epsilon_start, c.epsilon_end, c.epsilon_fraction,
                       self.longest_episode)

    # ---------------------------------------------------------------- learning

    def update(self) -> tuple[dict[str, Any], Episodes]:
        """Act `rollout` steps of every env into the replay, then the optimiser steps they earn."""
        c = self.config
        episodes = Episodes()
        seen, mask = [], []
        self.policy.eval()
        with autocast(self.device, c.precision):
            for _ in range(c.rollout):
                self.actor.epsilon = self.epsilon()
                before = self.actor.state
                record, ended = self.actor.step()
                finished = self.cutter.add(record, before)
                if finished is not None:
                    self.replay.add(finished)
                if self.observes:
                    seen.append(record["obs"].copy())
                    mask.append(record["valid"].copy())
                self.global_step += c.num_envs
                for key, values in ended.values.items():
                    episodes.add(key, values)
        self.policy.train()
        if self.observes:  # the encoder's running statistics, as A2C's take in each rollout
            self.policy.observe(torch.from_numpy(np.stack(seen)).to(self.device), torch.from_numpy(np.stack(mask)).to(self.device))
        stats: dict[str, Any] = {"epsilon": self.actor.epsilon, "replay_sequences": float(len(self.replay))}
        if self.global_step >= c.learning_starts and len(self.replay):
            self.update_credit += c.rollout * c.num_envs * c.updates_per_step
            totals: dict[str, torch.Tensor] = {}
            steps = 0
            while self.update_credit >= 1.0:
                for key, value in self.learn_step().items():
                    totals[key] = totals.get(key, 0.0) + value
                self.update_credit -= 1.0
                steps += 1
            stats.update({key: value / steps for key, value in totals.items()} if steps else {})
            stats["gradient_steps"] = float(self.gradient_steps)
        self.updates += 1
        self.episodes += len(episodes)
        return stats, episodes

    def batch(self, count: int) -> Batch:
        """`count` sequences from the replay on the learner device, time-major."""
        sample = self.replay.sample(count)
        device = self.device
        tensor = lambda name, dtype=None: torch.from_numpy(np.ascontiguousarray(  # noqa: E731
            np.swapaxes(sample[name] if dtype is None else sample[name].astype(dtype), 0, 1))).to(device)
        inputs = StepInputs(tensor("obs", self.obs_dtype), tensor("prev_action", np.int64), tensor("prev_reward"), tensor("first"))
        if self.stored_state:
            fields = {name: torch.from_numpy(sample[f"state.{name}"]).to(device, getattr(self.state_template, name).dtype)
                      for name in self.state_template._fields}
            start_state = self.state_template._replace(**fields)
        else:  # an episode's first step resets it anyway; a segment without a stored state starts empty
            start_state = self.policy.initial_state(count, device)
        return Batch(inputs, start_state, tensor("valid"), tensor("action", np.int64), tensor("reward"), tensor("terminated"),
                     tensor("truncated"))

    def learn_step(self) -> dict[str, torch.Tensor]:
        """One optimiser step on a batch drawn from the replay, and the target network's update."""
        c = self.config
        batch = self.batch(c.batch_size)
        with autocast(self.device, c.precision):
            loss, stats = td_loss(self.policy, self.target, batch, self.burn_in, c.segment_length if self.segments else None,
                                  c.gamma, c.n_step, c.double_q, c.loss)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.clip_and_step(stats, ("td_loss",), self.gradient_steps + 1)
        self.gradient_steps += 1
        if self.gradient_steps % c.target_every == 0:
            update_target(self.target, self.policy, c.tau)
        return stats

    # ---------------------------------------------------------------- checkpoints

    def state_dict(self, with_envs: bool = True) -> dict[str, Any] | None:
        payload = super().state_dict(with_envs)
        payload["target"] = self.target.state_dict()
        payload["replay"] = {"file": self.replay_file, "mode": self.replay_mode, "pending": with_envs and self.pool.stores_state}
        payload["dqn"] = {"gradient_steps": self.gradient_steps, "update_credit": self.update_credit}
        return payload

    def save(self, with_envs: bool = True) -> Path | None:
        """The replay into the file the last checkpoint does not name, then the checkpoint naming
        it, then the other file removed (see agents/learners/dqn/replay.py)."""
        self.finite.check_run(self.config.run_dir)
        run_dir = Path(self.config.run_dir)
        previous = self.replay_file
        self.replay_file = FILES[1] if previous == FILES[0] else FILES[0]
        try:
            self.replay.save(run_dir / self.replay_file, self.cutter.pending())
            path = super().save(with_envs)
        except BaseException:
            self.replay_file = previous
            raise
        for name in FILES:
            if name != self.replay_file:
                (run_dir / name).unlink(missing_ok=True)
        return path

    def load_state_dict(self, payload: dict[str, Any]) -> None:
        super().load_state_dict(payload)
        restore("target network", lambda: self.target.load_state_dict(payload["target"]))
        replay, counters = payload.get("replay"), payload.get("dqn")
        if not isinstance(replay, dict) or replay.get("file") not in FILES:
            raise CheckpointError(f"the checkpoint's replay entry is {replay!r:.200}; it must name one of {list(FILES)}")
        if replay.get("mode") != self.replay_mode:  # the config is the checkpoint's: a safeguard
            raise CheckpointError(f"the checkpoint's replay holds {replay.get('mode')!r}, this run cuts {self.replay_mode!r}")
        fixed = self.cutter.pending()
        try:
            loaded = self.replay.load(Path(self.config.run_dir) / replay["file"], fixed, ("pending.starts",) if self.segments else ())
            if replay.get("pending") and self.resumed_how.startswith("envs and memory continue"):
                self.cutter.load_pending(loaded)
            else:
                self.cutter.clear()  # fresh episodes: the unfinished sequences are dropped
        except (ReplayError, KeyError, ValueError) as error:
            raise CheckpointError(f"the run's replay does not fit this run: {error}") from error
        self.replay_file = replay["file"]
        if not isinstance(counters, dict) or not isinstance(counters.get("gradient_steps"), int):
            raise CheckpointError(f"the checkpoint's dqn counters are {counters!r:.200}; they need gradient_steps and update_credit")
        self.gradient_steps = counters["gradient_steps"]
        self.update_credit = check_number("update_credit", counters.get("update_credit"))
