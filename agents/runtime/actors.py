"""Stepping the batch of envs: in the learner process, or sharded over CPU actor workers.

Both pools step one vector env of `num_envs` envs under NEXT_STEP autoreset, env i reset with
`seeds[i]` (the trainer derives them with agents/runtime/seeding.py:env_seeds; a new list set before
`reset` restarts the episodes from it). They give the same trajectories for the same actions
(envs/any_env.py makes them: our envs natively batched, any other id through
`gymnasium.make_vec`, sync, as the worker processes are the parallelism). Observations leave a pool flattened to (B, N)
(agents/runtime/observations.py), so one buffer holds any supported space. `ActorPool` splits the envs into contiguous shards, one per worker process; observations, actions, rewards, episode
ends and info metrics travel through shared memory, and a pipe per worker carries only the
command ("step") and its acknowledgement. A worker that dies or fails raises `ActorError` in the
learner (never a hang): the learner checks each worker's liveness while it waits.

This module imports no torch: workers are spawned processes that only need numpy and the envs.
A spawned worker imports its parent's main module too, so the training scripts keep their torch
imports inside their functions.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from durable.interrupt import ignore_stop_signals, stop_signals_ignored
from agents.runtime.observations import check_space, flat_dtype, flat_size, flatten
from envs.any_env import make_vector_env, metric_keys, metric_values
from envs.vector import GridVectorEnv

POLL_SECONDS = 0.05


class ActorError(RuntimeError):
    """An actor worker died or failed; the message says which and how."""


def check_action_space(space: gym.Space) -> None:
    if not isinstance(space, gym.spaces.Discrete):
        raise ValueError(f"action space {space} is not supported; supported: Discrete")


class LocalEnvs:
    """All envs stepped in this process."""

    num_shards = 1  # get_state() returns one state per shard

    def __init__(self, env_name: str, seeds: list[int], env_kwargs: dict[str, Any] | None = None):
        num_envs = len(seeds)
        self.env = make_vector_env(env_name, num_envs, AutoresetMode.NEXT_STEP, **(env_kwargs or {}))
        self.num_envs = num_envs
        self.seeds = list(seeds)
        try:
            self.observation_space = self.env.single_observation_space
            check_space(self.observation_space)
            check_action_space(self.env.single_action_space)
        except ValueError:
            self.env.close()
            raise
        self.num_actions = int(self.env.single_action_space.n)
        self.action_start = int(self.env.single_action_space.start)
        self.info_keys = metric_keys(self.env.reset(seed=self.seeds)[1], num_envs)

    def reset(self) -> np.ndarray:
        """Start every env afresh from `self.seeds` (env i from seeds[i]); the (B, N) first observations."""
        return self._flat(self.env.reset(seed=self.seeds)[0])

    def step(self, actions: np.ndarray):
        """(B,) actions in [0, A) -> obs (B, N), reward (B,), terminated (B,), truncated (B,),
        info {key: (B,)} (NaN where an env did not report the key)."""
        obs, reward, terminated, truncated, info = self.env.step(actions + self.action_start)
        metrics = {key: metric_values(info, key, self.num_envs) for key in self.info_keys}
        return self._flat(obs), reward, terminated, truncated, metrics

    def _flat(self, obs) -> np.ndarray:
        return flatten(self.observation_space, obs, self.num_envs)

    @property
    def stores_state(self) -> bool:
        """Whether get_state can save the envs: ours can (numpy arrays and numbers); another
        env's state is arbitrary Python, which a checkpoint does not hold (it would be code to
        run on loading), so a resumed run starts fresh episodes of it."""
        return isinstance(self.env, GridVectorEnv)

    @property
    def longest_episode(self) -> int | None:
        """The most steps an episode can last (None: no bound known): our envs' rules say; for
        another env, its time limit (its spec's max_episode_steps)."""
        if isinstance(self.env, GridVectorEnv):
            return self.env.rules.longest_episode
        return self.env.envs[0].spec.max_episode_steps if getattr(self.env, "envs", None) and self.env.envs[0].spec else None

    def get_state(self) -> list[dict[str, Any] | None]:
        """The envs' full state (layouts, positions, generators) as numpy arrays and numbers, one
        entry per shard; None where the env cannot save it (stores_state)."""
        return [self.env.get_state() if self.stores_state else None]

    def set_state(self, state: list[dict[str, Any]]) -> None:
        self.env.set_state(state[0])

    def close(self) -> None:
        self.env.close()


def shard_bounds(num_envs: int, num_actors: int) -> list[tuple[int, int]]:
    """Contiguous [start, stop) ranges of envs, one per worker, sizes differing by at most one."""
    if not 1 <= num_actors <= num_envs:
        raise ValueError(f"num_actors must be between 1 and num_envs ({num_envs}), got {num_actors}")
    edges = np.linspace(0, num_envs, num_actors + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


class ActorPool:
    """The envs sharded over `num_actors` worker processes, exchanging data in shared memory."""

    def __init__(self, env_name: str, seeds: list[int], num_actors: int, env_kwargs: dict[str, Any] | None = None):
        env_kwargs = env_kwargs or {}
        probe = LocalEnvs(env_name, seeds[:1], env_kwargs)
        num_envs = len(seeds)
        self.num_envs, self.seeds = num_envs, list(seeds)
        self.observation_space, self.num_actions, self.info_keys = probe.observation_space, probe.num_actions, probe.info_keys
        self.stores_state, self.longest_episode = probe.stores_state, probe.longest_episode
        probe.close()
        context = mp.get_context("spawn")  # safe beside CUDA and threads in the learner
        n_columns, n_info = flat_size(self.observation_space), len(self.info_keys)
        obs_dtype = flat_dtype(self.observation_space)
        self._shared = {
            "actions": (context.RawArray("q", num_envs), np.int64, (num_envs,)),
            "obs": (context.RawArray("q" if obs_dtype == np.int64 else "f", num_envs * n_columns), obs_dtype, (num_envs, n_columns)),
            "reward": (context.RawArray("d", num_envs), np.float64, (num_envs,)),
            "terminated": (context.RawArray("b", num_envs), np.bool_, (num_envs,)),
            "truncated": (context.RawArray("b", num_envs), np.bool_, (num_envs,)),
            "info": (context.RawArray("d", max(n_info, 1) * num_envs), np.float64, (max(n_info, 1), num_envs)),
        }
        self.arrays = shared_views(self._shared)
        self.bounds = shard_bounds(num_envs, num_actors)
        self.num_shards = len(self.bounds)
        self._pipes, self._processes = [], []
        for index, (start, stop) in enumerate(self.bounds):
            ours, theirs = context.Pipe()
            process = context.Process(
                target=worker_main,
                args=(index, theirs, self._shared, start, stop, env_name, self.seeds[start:stop], env_kwargs, self.info_keys),
                name=f"actor-{index}",
                daemon=True,
            )
            with stop_signals_ignored():
                process.start()
            theirs.close()
            self._pipes.append(ours)
            self._processes.append(process)
        self._gather("ready")

    def _command(self, *message: Any) -> None:
        for index, pipe in enumerate(self._pipes):
            try:
                pipe.send(message)
            except (BrokenPipeError, EOFError, OSError):
                raise self._died(index) from None

    def _gather(self, what: str) -> list[Any]:
        """Wait for every worker's reply, checking that each is alive while waiting."""
        replies = []
        for index, (pipe, process) in enumerate(zip(self._pipes, self._processes)):
            while True:
                try:
                    if pipe.poll(POLL_SECONDS):
                        reply = pipe.recv()
                        break
                except (EOFError, OSError):
                    raise self._died(index) from None
                if not process.is_alive():
                    raise self._died(index)
            if reply[0] == "error":
                raise ActorError(f"actor worker {index} failed while {what}:\n{reply[1]}")
            replies.append(reply[1])
        return replies

    def _died(self, index: int) -> ActorError:
        process = self._processes[index]
        process.join(timeout=1.0)
        return ActorError(f"actor worker {index} (pid {process.pid}) died with exit code {process.exitcode}")

    def reset(self) -> np.ndarray:
        """As LocalEnvs.reset, from `self.seeds` as they are now (a resume may have changed
        them): each worker restarts its shard [start, stop) from seeds[start:stop]."""
        self._command("reset", self.seeds)
        self._gather("resetting")
        return self.arrays["obs"].copy()

    def step(self, actions: np.ndarray):
        self.arrays["actions"][:] = actions
        self._command("step")
        self._gather("stepping")
        a = self.arrays
        info = {key: a["info"][k].copy() for k, key in enumerate(self.info_keys)}
        return a["obs"].copy(), a["reward"].copy(), a["terminated"].copy(), a["truncated"].copy(), info

    def get_state(self) -> list[dict[str, Any] | None]:
        self._command("get_state")
        return self._gather("saving its envs")

    def set_state(self, state: list[dict[str, Any]]) -> None:
        if len(state) != len(self._pipes):
            raise ValueError(f"env state has {len(state)} shards, this pool has {len(self._pipes)} workers")
        for pipe, shard in zip(self._pipes, state):
            pipe.send(("set_state", shard))
        self._gather("restoring its envs")

    def close(self) -> None:
        for pipe, process in zip(self._pipes, self._processes):
            try:
                pipe.send(("close",))
            except (BrokenPipeError, OSError):
                pass
            process.join(timeout=2.0)
            if process.is_alive():
                process.terminate()
            pipe.close()


def shared_views(shared: dict[str, tuple]) -> dict[str, np.ndarray]:
    """numpy views of the shared buffers."""
    return {name: np.frombuffer(buffer, dtype=dtype).reshape(shape) for name, (buffer, dtype, shape) in shared.items()}


def worker_main(index, pipe, shared, start, stop, env_name, seeds, env_kwargs, info_keys) -> None:
    """One actor worker: steps envs [start, stop) on command until told to close. Ctrl-C and
    the other stop signals (which Slurm sends to every process of a job) are left to the learner,
    which saves a checkpoint (envs included) and then closes the workers."""
    ignore_stop_signals()
    try:
        arrays = shared_views(shared)
        envs_here = LocalEnvs(env_name, seeds, env_kwargs)
        pipe.send(("ok", None))
        while True:
            command, *args = pipe.recv()
            if command == "step":
                obs, reward, terminated, truncated, info = envs_here.step(arrays["actions"][start:stop])
                arrays["obs"][start:stop] = obs
                arrays["reward"][start:stop] = reward
                arrays["terminated"][start:stop] = terminated
                arrays["truncated"][start:stop] = truncated
                for k, key in enumerate(info_keys):
                    arrays["info"][k, start:stop] = info[key]
                reply = None
            elif command == "reset":
                envs_here.seeds = args[0][start:stop]
                arrays["obs"][start:stop] = envs_here.reset()
                reply = None
            elif command == "get_state":
                reply = envs_here.get_state()[0]
            elif command == "set_state":
                envs_here.set_state([args[0]])
                reply = None
            elif command == "close":
                envs_here.close()
                return
            else:
                raise ValueError(f"unknown command {command!r}")
            pipe.send(("ok", reply))
    except (EOFError, BrokenPipeError):
        return  # the learner is gone: nothing to report to
    except BaseException:
        pipe.send(("error", traceback.format_exc()))


def make_env_pool(env_name: str, seeds: list[int], num_actors: int, env_kwargs: dict[str, Any] | None = None):
    """One env per seed. num_actors = 0: LocalEnvs; otherwise an ActorPool of that many workers."""
    if num_actors == 0:
        return LocalEnvs(env_name, seeds, env_kwargs)
    return ActorPool(env_name, seeds, num_actors, env_kwargs)
