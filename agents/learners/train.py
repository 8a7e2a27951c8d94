"""The A2C training loop: act, learn, log, checkpoint; resumable exactly.

`Trainer(config)` builds the env pool, the policy on the learner device and the optimiser;
`Trainer.from_checkpoint(run_dir)` rebuilds one from a saved run. `train()` loops until
`total_steps` frames: collect T steps of B envs (agents/learners/rollout.py), get the rollout's logits and
values with gradients, take one optimiser step, log. The gradients come from the graph kept
while acting (feedback: its steps are sequential anyway, so acting is the learning pass's
forward), or from running the policy over the chunk again from the rollout's starting core state
(the others: acting then runs without gradients); `learner` in the config chooses, `auto` the
faster as measured by benchmarks/a2c.py (see KEEPS_ACTING_GRAPH). Checkpoints hold everything
the next update depends on (weights, optimiser, counters, random generators, the envs, the core
state and the actor's carry), so a resumed run makes the same updates as one never stopped.

Under torchrun (agents/runtime/distributed.py) each rank steps its share of the `num_envs` envs (rank r:
envs r B/N .. (r + 1) B/N - 1, seeded as one process seeds them: agents/runtime/seeding.py:env_seeds keys
each env's stream by its index in the whole batch) with its own actor workers, and
the ranks' gradients are summed so that N ranks take exactly the update one process would take on
the whole batch (to float rounding): the loss divides by the valid steps of all ranks, the
running observation statistics see every rank's observations, and gradients are clipped after
the sum. Recomputing learners wrap the policy in DistributedDataParallel, whose forward prepares
the gradient all-reduce; the learner that keeps the acting graph never calls the policy's
forward (the core is fed a step at a time through Policy.open while acting), which DDP's
backward hooks rely on, so it sums the gradients itself after backward, as one flat all-reduce
on the same engine. Rank 0 alone logs, shows progress and writes the checkpoint, which holds
every rank's envs, actor carry and generators; ranks agree every update on stopping and saving,
so none is left waiting in a collective.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

import envs
from agents.runtime import distributed
from agents.learners.a2c import a2c_loss, gae_advantages
from agents.learners.graphed_acting import GraphedActing
from agents.config.a2c_config import EPISODE, KEEPS_ACTING_GRAPH, A2CConfig
from agents.config.config_cli import run_core_options
from agents.runtime.actors import ActorError, make_env_pool
from agents.runtime.checkpoint_fields import check_counters, check_number, check_world_size, restore
from agents.runtime.checkpoint import (CheckpointError, arrays_to_tensors, checkpoint_path, load_checkpoint, run_checkpoint, save_checkpoint,
                               tensors_to_arrays)
from agents.runtime.device import resolve_device
from agents.runtime.freed_memory import keep_freed_memory
from agents.runtime.memory_budget import check_model_fits
from agents.runtime.finite_watch import FiniteWatch, NonFiniteError, total_norm
from durable.interrupt import StopOnInterrupt
from agents.model.policy import Policy
from agents.runtime.precision import autocast
from durable.records import write_json
from agents.learners.play import play_episodes
from agents.learners.rollout import Actor, Episodes, Rollout
from agents.learners.run_size import check_run_fits
from agents.learners.solve import RECORD, SolveCheck
from agents.runtime.seeding import env_seeds, rng_states, seed_everything, set_rng_states
from agents.learners.window import GradientWindow

if TYPE_CHECKING:  # imported where a run opens its log: evaluate.py and the runners' other steps import this module and write none
    from torch.utils.tensorboard import SummaryWriter

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


def config_from_checkpoint(config_class: type, payload: dict[str, Any], env_modules: Collection[str] = (),
                           overrides: dict[str, Any] | None = None, device: str | None = None) -> A2CConfig:
    """The run config a checkpoint holds (with `overrides`), its env's module checked before
    anything imports it (envs.check_env_import); CheckpointError where it does not fit. The
    core's run choices (the Feedback step) hold where they can run on `device` (default the
    config's) and are chosen again where they cannot (config_cli.run_core_options, saved=True)."""
    saved = payload.get("config")
    if not isinstance(saved, dict):
        raise CheckpointError("the checkpoint holds no config (a dict of the run's settings); it is not a whole run's checkpoint")
    try:
        envs.check_env_import(str(saved.get("env", "")), env_modules)
        config = config_class(**{**saved, **(overrides or {})})
        options = run_core_options(config.core, config.core_options, device or config.device, config.precision, saved=True)
        return config if options == config.core_options else dataclasses.replace(config, core_options=options)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"the checkpoint's config does not fit this version: {error}") from error


class Trainer:
    """A2C: one optimiser step per rollout. agents/learners/ppo.py:PPOTrainer changes only `learn`."""

    kind = KIND  # the checkpoint's kind
    config_class = A2CConfig
    script = "train_a2c.py"  # the command that trains it (what a settings file is for: agents/config/settings_file.py)
    keeps_acting_outputs = False  # Actor.collect(keep_outputs=...): PPO's reference point
    keeps_acting_memory = False  # Actor.collect(keep_memory=...): PPO's cached_memory learner
    sums_gradients = False  # sum the ranks' gradients by hand, not through DDP, whatever the learner

    def __init__(self, config: A2CConfig):
        self.config = config
        self.world = distributed.init()
        self.device = distributed.device_for(resolve_device(config.device), self.world)
        if config.threads:
            torch.set_num_threads(config.threads)
        keep_freed_memory()  # no page faults on the memory each update frees and takes again
        seed_everything(config.seed)  # alike on every rank: the same initial weights and sampling noise
        if config.cuda_graph and self.device.type != "cuda":
            raise ValueError(f"--cuda-graph needs a CUDA device; this run's device is {self.device} (--device {config.device})")
        self.first_env, last_env = self.world.share(config.num_envs, "num_envs")
        self.own_envs = range(self.first_env, last_env)  # indices into the whole batch
        local_envs = len(self.own_envs)
        if self.world.size > 1 and config.num_actors > local_envs:
            raise ValueError(f"num_actors ({config.num_actors}) is per process and must be <= its share of num_envs "
                             f"({local_envs} = {config.num_envs} / {self.world.size} processes)")
        check_run_fits(local_envs, config.rollout, config.embed_dim)  # before anything is allocated (agents/learners/run_size.py)
        self.pool = make_env_pool(config.env, self.training_seeds(), config.num_actors, config.env_options)
        try:
            check_model_fits(lambda: build_policy(config, self.pool.observation_space, self.pool.num_actions),
                             f"the {config.core} policy", "lower --embed-dim or the core's widths (--core-opt)")
            self.policy = build_policy(config, self.pool.observation_space, self.pool.num_actions).to(self.device)
            self.optimizer = build_optimizer(config, self.policy)
            # A gradient window (--bptt > rollout) reaches steps acting's graph does not hold: recompute.
            self.keep_graph = config.learner == "acting_graph" or (
                config.learner == "auto" and config.core in KEEPS_ACTING_GRAPH and self.policy.can_open and not config.reaches_back
                and not config.cuda_graph)
            # Episodes packed side by side shorten only a core whose steps run one after another.
            self.packs_episodes = config.pack_episodes and self.policy.core.sequential
            if self.keep_graph and not self.policy.can_open:
                raise ValueError(f"learner 'acting_graph' needs a core fed one step at a time (feedback, lstm, gru); {config.core!r} is not")
            dropout = config.core_options.get("dropout", 0.0)
            if dropout > 0 and not self.keep_graph:
                # Recomputing, acting runs without dropout and learning with it (other masks), so
                # the policy that acted is not the one whose gradient is taken.
                raise ValueError(
                    f"dropout={dropout} needs a learner that keeps the acting graph (--learner acting_graph, "
                    f"cores feedback, lstm or gru), so acting and learning use the same masks; use --core-opt dropout=0 otherwise"
                )
            graphed = GraphedActing(self.policy, local_envs, self.device) if config.cuda_graph else None
            self.actor = Actor(self.pool, self.policy, self.device, (self.first_env, config.num_envs), graphed)
            self.window = self.gradient_window()  # the steps before each rollout its gradient reaches
            # The learner's forward, through DistributedDataParallel under torchrun (see the module docstring).
            by_hand = self.keep_graph or self.sums_gradients
            self.learner = self.policy if by_hand else distributed.data_parallel(self.policy, self.world)
            # Encoders with running statistics hold them in buffers; only then are observations gathered.
            self.gathers_observations = self.world.size > 1 and any(True for _ in self.policy.encoder.buffers())
        except BaseException:
            self.pool.close()
            raise
        self.updates = 0
        self.global_step = 0
        self.episodes = 0
        self.finite = FiniteWatch()  # stops training at a non-finite loss or gradient, before it is saved
        self.recent_returns: list[float] = []
        # --solve-at: checks of the greedy policy, and when it solved (agents/learners/solve.py)
        self.solve = SolveCheck(config.solve_at, config.solve_metric, config.eval_every, config.eval_growth, config.eval_episodes)

    def gradient_window(self) -> GradientWindow:
        """The window --bptt asks for: a history of K - T steps, or each running episode's
        (agents/learners/window.py), which needs episodes of bounded length or a cap (--bptt-max)."""
        c = self.config
        episodes = c.bptt == EPISODE
        if episodes and c.max_history is None and self.pool.longest_episode is None:
            raise ValueError(f"--bptt episode needs episodes of bounded length, and env {c.env!r} has no time limit; "
                             f"cap the window with --bptt-max N (or give the env a max_episode_steps)")
        return GradientWindow(c.max_history, episodes)

    def training_seeds(self, restart: int = 0) -> list[int]:
        """The seeds of this process's envs, for episodes starting at frame `restart`."""
        return env_seeds(self.config.seed, self.own_envs, "training", restart)

    # ---------------------------------------------------------------- learning

    def update(self) -> tuple[dict[str, float], Episodes]:
        """Collect one rollout and take one optimiser step on it."""
        c = self.config
        self.policy.train(self.keep_graph)  # acting is the learning pass, or dropout (if any) is off
        with autocast(self.device, c.precision):
            rollout, episodes = self.actor.collect(c.rollout, self.keep_graph, self.keeps_acting_outputs, self.keeps_acting_memory)
        self.policy.train()
        stats = self.learn(rollout)
        with autocast(self.device, c.precision):
            self.window.advance(self.policy, rollout)
        parts = distributed.gather_to_main(episodes, "gathering episode statistics")
        if parts is not None:  # rank 0 counts and logs the episodes of every rank
            episodes = Episodes()
            for part in parts:
                for key, values in part.values.items():
                    episodes.add(key, values)
        self.updates += 1
        self.global_step += c.rollout * c.num_envs
        self.episodes += len(episodes)
        return stats, episodes

    def learn(self, r: Rollout) -> dict[str, float]:
        c = self.config
        if r.logits is None:  # the window's history, then T + 1 steps: the last gives the bootstrap value
            w = self.window.learning_inputs(r, bootstrap=True)
            with autocast(self.device, c.precision):
                logits, values = w.call(self.learner, self.packs_episodes)
            logits = logits[:-1]  # the bootstrap step's: no action taken there
        else:
            logits, values = r.logits, r.values
        logits, values = logits.float(), values.float()  # the loss in float32 whatever the precision
        advantages = gae_advantages(r.reward, values, r.terminated, r.truncated, r.valid, c.gamma, c.gae_lambda)
        returns = advantages + values[:-1].detach()
        count = distributed.sum_tensor(r.valid.sum().to(values.dtype), "counting valid steps")  # over all ranks
        loss, stats = a2c_loss(logits, values[:-1], r.action, advantages, returns, r.valid, c.value_coef, c.entropy_coef, count)
        self.optimizer_step(loss, stats)
        self.observe(r)
        return stats

    def optimizer_step(self, loss: torch.Tensor | None, stats: dict[str, torch.Tensor]) -> None:
        """Backward, gradients summed over ranks, clipping, this update's learning rate, step;
        `stats`' loss parts become sums over ranks and gain the gradient norm. A rank with no
        share of the batch (loss None; PPO's minibatches) adds zero gradients and takes the step."""
        c = self.config
        self.optimizer.zero_grad(set_to_none=True)
        if self.keep_graph or self.sums_gradients:
            if loss is not None:
                loss.backward()
            distributed.sum_gradients([p for p in self.policy.parameters() if p.requires_grad])
        else:
            (loss * self.world.size).backward()  # DDP averages over ranks; the ranks' losses are to be summed
        # Sums over this rank's steps / count: summed over ranks (explained_variance stays this rank's).
        parts = ("policy_loss", "value_loss", "entropy")
        for key, value in zip(parts, distributed.sum_tensor(torch.stack([stats[k] for k in parts]), "summing losses")):
            stats[key] = value
        self.clip_and_step(stats, parts, self.updates + 1)

    def clip_and_step(self, stats: dict[str, torch.Tensor], watched: tuple[str, ...], update: int) -> None:
        """Clip the gradients by --max-grad-norm (`stats` gains their norm, grad_norm), note
        `watched` stats and the norm as update `update` for the finite watch, set this update's
        learning rate and step (the optimiser step of every learner, DQN's too)."""
        c = self.config
        if c.max_grad_norm > 0:
            stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), c.max_grad_norm)
        else:
            stats["grad_norm"] = total_norm(list(self.policy.parameters()))
        self.finite.note(update, [stats[key] for key in (*watched, "grad_norm")])
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate()
        self.optimizer.step()

    def observe(self, r: Rollout) -> None:
        """The encoders' running statistics take in the rollout's observations: after the step,
        so acting on this rollout and learning from it saw the same statistics."""
        obs, valid = r.inputs.obs[:-1], r.valid
        if self.gathers_observations:  # every rank's, in the order of one process's batch
            shares = distributed.all_gather((obs.cpu(), valid.cpu()), "gathering observations")
            obs, valid = (torch.cat(tensors, dim=1).to(self.device) for tensors in zip(*shares))
        self.policy.observe(obs, valid)

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

    def state_dict(self, with_envs: bool = True) -> dict[str, Any] | None:
        """Everything a resumed run needs. Without the envs (a worker died), resuming starts
        fresh episodes. Under torchrun, on rank 0 (None elsewhere; every rank must call it):
        "envs", "actor" and "rng" are lists with every rank's own, in rank order."""
        with_envs = with_envs and self.pool.stores_state
        own = {
            "rng": rng_states(),
            "envs": {"shards": self.pool.num_shards, "state": arrays_to_tensors(self.pool.get_state())} if with_envs else None,
            "actor": self.actor.carry() if with_envs else None,
            "window": self.window.state_dict() if with_envs else None,
        }
        own = distributed.gather_parts(own, self.world, "gathering the checkpoint")
        if own is None:
            return None
        return {
            "config": self.config.to_dict(),
            "world_size": self.world.size,
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "counters": {"updates": self.updates, "global_step": self.global_step, "episodes": self.episodes},
            "recent_returns": [float(value) for value in self.recent_returns],
            "solve": self.solve.state_dict(),
            **own,
        }

    def save(self, with_envs: bool = True) -> Path | None:
        """Write the checkpoint (on rank 0; under torchrun every rank must call this); a
        NonFiniteError instead if an update since the start was not finite (agents/runtime/finite_watch.py),
        which every rank raises alike (the gradients and losses it watches are summed over ranks)."""
        self.finite.check_run(self.config.run_dir)
        payload = self.state_dict(with_envs)
        path = None if payload is None else save_checkpoint(run_checkpoint(self.config.run_dir), self.kind, payload)
        distributed.wait_for_all("waiting for the checkpoint to be written")
        return path

    @classmethod
    def from_checkpoint(cls, run_dir_or_file: str, overrides: dict[str, Any] | None = None, env_modules: Collection[str] = ()) -> "Trainer":
        """Rebuild a run from its checkpoint, in the checkpoint's folder (a moved run folder
        stays where it is); `overrides` may change only fields that do not change what is
        learned (RESUMABLE_OVERRIDES). A `module:EnvId` env imports its module only if it is a
        known env package or in `env_modules` (envs.check_env_import)."""
        overrides = overrides or {}
        bad = sorted(set(overrides) - RESUMABLE_OVERRIDES)
        if bad:
            raise CheckpointError(f"cannot change {bad} when resuming; only {sorted(RESUMABLE_OVERRIDES)} may change")
        distributed.init()
        # Rank 0 reads it and sends it to the others, whose machines need not hold the run folder.
        # The run continues in the folder its checkpoint was read from, wherever it was first made.
        payload, run_dir = distributed.from_main(
            lambda: (load_checkpoint(run_dir_or_file, cls.kind), str(checkpoint_path(run_dir_or_file).parent)), "reading the checkpoint")
        config = config_from_checkpoint(cls.config_class, payload, env_modules, {**overrides, "run_dir": run_dir})
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
        except (RuntimeError, ValueError, KeyError, TypeError) as error:
            raise CheckpointError(f"checkpoint does not fit this model: {error}") from error
        counters = check_counters(payload.get("counters"), ("updates", "global_step", "episodes"))
        self.updates, self.global_step, self.episodes = counters["updates"], counters["global_step"], counters["episodes"]
        returns = payload.get("recent_returns")
        if not isinstance(returns, list):
            raise CheckpointError(f"the checkpoint's recent_returns are {type(returns).__name__}, not a list of numbers")
        self.recent_returns = [check_number("recent_returns", value, -math.inf) for value in returns][-RECENT_EPISODES:]
        if "solve" in payload:  # checkpoints from before the solve check have none: nothing checked yet
            try:
                self.solve.load_state_dict(payload["solve"])
            except ValueError as error:
                raise CheckpointError(str(error)) from error
        saved_world = check_world_size(payload, ("rng", "envs", "actor", "window"))  # 1 before torchrun
        restore("random generator states (rng)", lambda: set_rng_states(distributed.own_part(payload, "rng", self.world)))
        saved_envs = distributed.own_part(payload, "envs", self.world)
        shards = self.pool.num_shards
        if saved_world == self.world.size and saved_envs is not None and saved_envs["shards"] == shards:
            try:
                self.pool.set_state(tensors_to_arrays(saved_envs["state"]))
                self.actor.load_carry(distributed.own_part(payload, "actor", self.world))
            except (KeyError, TypeError, ValueError, ActorError) as error:
                raise CheckpointError(f"the checkpoint's envs or actor do not fit this run: {error}") from error
            window = distributed.own_part(payload, "window", self.world) if "window" in payload else None
            if window is not None:
                restore("gradient window", lambda: self.window.load_state_dict(window, self.device))
            self.resumed_how = "envs and memory continue where they were"
        else:
            if saved_world != self.world.size:
                why = f"the number of processes differs ({saved_world} saved, {self.world.size} now)"
            elif saved_envs is None and not self.pool.stores_state:
                why = f"{self.config.env!r} is not one of the suite's envs, whose state a checkpoint holds"
            elif saved_envs is None:
                why = "the checkpoint has no env state"
            else:
                why = f"env shards differ ({saved_envs['shards']} saved, {shards} now)"
            # Fresh episodes, not a replay of the first ones.
            self.pool.seeds = self.training_seeds(restart=self.global_step)
            self.actor.restart()
            self.window.clear()
            self.resumed_how = f"clean episode restart: {why}"

    def close(self) -> None:
        """Stop the actor workers (the process group stays: the command line closes it)."""
        self.pool.close()

    # ---------------------------------------------------------------- the loop

    def train(self) -> None:
        """Train to total_steps with logging and checkpoints; always saves on the way out.

        The first stop signal (Ctrl-C, SIGTERM, SIGHUP, SIGUSR2: durable/interrupt.py) anywhere
        in here (opening the log too) lets the update under way finish, saves, then raises
        StopSignal; a second one stops at once. Under torchrun only rank 0 logs; a stop signal
        on any rank stops every rank after the same update."""
        c = self.config
        interrupt = StopOnInterrupt()
        with interrupt:
            writer = self._open_log() if self.world.main else None
            bar = tqdm(total=c.total_steps, initial=self.global_step, unit="frame", unit_scale=True, dynamic_ncols=True,
                       disable=not self.world.main)
            with_envs, save_at_exit = True, True
            try:
                self._loop(writer, bar, interrupt)
            except BaseException as error:
                # A dead worker's envs cannot be saved; after a second Ctrl-C the workers may be
                # mid-command. Either way the checkpoint keeps the rest, and resuming restarts
                # episodes. Under torchrun the other ranks are not at the save's collective (or
                # are gone): the last checkpoint stands.
                with_envs = not isinstance(error, (ActorError, KeyboardInterrupt))
                save_at_exit = self.world.size == 1 and not isinstance(error, NonFiniteError)
                raise
            finally:
                bar.close()
                path = self.save(with_envs) if save_at_exit else None
                if path is not None and self.config.solve_at is not None:
                    self.write_solve_record()  # solved, censored at the cap, or neither yet (stopped)
                if writer is not None:
                    writer.close()
                if path is not None:
                    tqdm.write(f"checkpoint: {path} (step {self.global_step:,})")
        if interrupt.requested:
            interrupt.stop()

    def _open_log(self) -> SummaryWriter:
        """The run folder's config.json and TensorBoard writer (rank 0's job)."""
        c = self.config
        run_dir = Path(c.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json(run_dir / "config.json", c.to_dict(), indent=2)
        # A checkpoint is written after its update's logs, so a resumed run drops only what was
        # logged after it: steps beyond global_step (the last saved update logged at it).
        from torch.utils.tensorboard import SummaryWriter  # 0.2 s of import (the TYPE_CHECKING note above)

        writer = SummaryWriter(str(run_dir), purge_step=self.global_step + 1 if self.global_step else None)
        if self.global_step == 0:
            writer.add_text("config", "```\n" + json.dumps(c.to_dict(), indent=2) + "\n```")
        return writer

    def _loop(self, writer: SummaryWriter | None, bar: tqdm, interrupt: "StopOnInterrupt") -> None:
        """Update, log and checkpoint every save_every seconds until done or asked to stop.
        Under torchrun the ranks agree before each update whether to stop or save (a Ctrl-C or a
        clock on any rank), so all take the same branch; frames count every rank's envs."""
        c = self.config
        last_save = time.monotonic()
        while self.global_step < c.total_steps and self.solve.solved is None:
            stop, save = distributed.any_rank([interrupt.requested, time.monotonic() - last_save >= c.save_every],
                                              "agreeing to stop or save")
            if stop:
                interrupt.requested = True
                return
            if save and self.updates:
                self.save()
                last_save = time.monotonic()
            started = time.perf_counter()
            stats, episodes = self.update()
            if self.updates % c.log_every == 0:  # as the losses are read for the log (on every rank, to stop together)
                self.finite.check_run(self.config.run_dir)
            frames_per_second = c.rollout * c.num_envs / (time.perf_counter() - started)
            if writer is not None:
                self.log(writer, stats, episodes, frames_per_second)
            self.solve.seconds += time.perf_counter() - started
            if self.solve.due(self.global_step, c.total_steps):
                self.check_solved(writer)
            bar.update(c.rollout * c.num_envs)
            mean_return = np.mean(self.recent_returns) if self.recent_returns else float("nan")
            bar.set_postfix(SPS=f"{frames_per_second:,.0f}", ret=f"{mean_return:.3f}", refresh=False)

    def check_solved(self, writer: SummaryWriter | None) -> None:
        """Score the greedy policy (rank 0; every rank keeps the entry, so all stop together),
        log it and write RUN/solve.json (agents/learners/solve.py)."""
        started = time.perf_counter()
        entry = distributed.from_main(lambda: self.solve.score(self.play, self.global_step, self.episodes), "scoring the policy")
        solved = self.solve.add(entry)
        spent = time.perf_counter() - started
        self.solve.seconds += spent
        self.solve.check_seconds += spent
        if writer is not None:
            writer.add_scalar(f"solve/greedy_{self.config.solve_metric}", entry["score"], self.global_step)
            self.write_solve_record()
            if solved:
                tqdm.write(f"solved at {entry['frames']:,} frames ({entry['episodes']:,} episodes, {entry['seconds']:,.0f} s): "
                           f"greedy {self.config.solve_metric} {entry['score']:.3f}, confirmed {entry['confirmation']:.3f}")

    def play(self, seed: int) -> dict[str, np.ndarray]:
        """The greedy policy's --eval-episodes episodes on evaluation streams of `seed`, one per
        env, as acting runs it; the global generators as they were before (so training draws
        what it would have drawn without the check)."""
        c = self.config
        states = rng_states()
        self.policy.eval()
        try:
            with autocast(self.device, c.precision):
                return play_episodes(self.policy, self.device, c.env, c.env_options, c.eval_episodes, seed, c.eval_episodes, greedy=True)
        finally:
            set_rng_states(states)

    def write_solve_record(self) -> None:
        """RUN/solve.json, from the solve check's state (rank 0's job)."""
        write_json(Path(self.config.run_dir) / RECORD, self.solve.record(self.global_step, self.config.total_steps), indent=1)

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

