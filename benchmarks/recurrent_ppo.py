"""The peer for benchmarks/a2c.py's LSTM: sb3-contrib's RecurrentPPO training on our maze.

It is set up to do the work of one of our A2C updates, so that frames per second compare the
learners and not the settings: the same native vector env (`gymnasium.make_vec` of the maze, B =
64 envs, autoreset in the same step as stable-baselines3 expects), rollouts of T = 100 steps per
env, one LSTM of 1 x 256 shared by the actor and the critic with linear heads on it (no MLP
between), and one epoch over the rollout as a single minibatch (n_epochs 1, batch_size T * B):
one forward and backward pass over the chunk and one optimiser step per rollout. What still
differs is each implementation's own: RecurrentPPO one-hot encodes the observation (98 inputs)
where our policy embeds it with the previous action and reward (177 inputs), and it computes a
bootstrap value per truncated env, one LSTM call each, at the end of every maze episode.

Timing follows benchmarks/a2c.py's workers: one untimed update (warm-up), then updates until
`seconds` have passed (at least two), timed from the start of one rollout to the start of the
next (its logging included); the acting time is the time in RecurrentPPO.collect_rollouts. Needs
the `bench` extra (pip install -e ".[bench]").
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv

import envs
from experiments.peer_sb3 import IntFlattenExtractor


class NativeVecEnv(VecEnv):
    """stable-baselines3's VecEnv interface over one of our native vector envs (SAME_STEP
    autoreset), so RecurrentPPO steps the maze as fast as our trainer does rather than through a
    Python loop over single envs (DummyVecEnv)."""

    def __init__(self, env_id: str, num_envs: int, seed: int):
        self.env = gym.make_vec(env_id, num_envs=num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
        super().__init__(num_envs, self.env.single_observation_space, self.env.single_action_space)
        self.first_seed = seed
        self.actions = None

    def reset(self):
        obs, _ = self.env.reset(seed=self.first_seed)
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self.actions = actions

    def step_wait(self):
        """obs (B, F), rewards (B,), dones (B,), one info dict per env in sb3's keys."""
        obs, reward, terminated, truncated, info = self.env.step(self.actions)
        done = terminated | truncated
        infos = [{"TimeLimit.truncated": bool(truncated[i] and not terminated[i])} for i in range(self.num_envs)]
        for i in np.flatnonzero(done):
            infos[i]["terminal_observation"] = info["final_obs"][i]
        return obs, reward.astype(np.float32), done, infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return [getattr(self.env, attr_name)] * len(list(self._get_indices(indices)))

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        raise NotImplementedError("the benchmark sets no env attributes")

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        raise NotImplementedError("the benchmark calls no env methods")

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False] * len(list(self._get_indices(indices)))


class Clock(BaseCallback):
    """Marks the start and end of every rollout; stops learning at the first step of a rollout
    once `seconds` of timed updates (those after the first, the warm-up) have passed, at least two."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.first_step = False

    def _on_rollout_start(self) -> None:
        self.starts.append(time.perf_counter())
        self.first_step = True

    def _on_rollout_end(self) -> None:
        self.ends.append(time.perf_counter())

    def _on_step(self) -> bool:
        first_step, self.first_step = self.first_step, False
        timed = len(self.starts) - 2  # complete updates after the warm-up
        return not (first_step and timed >= 2 and self.starts[-1] - self.starts[1] >= self.seconds)


def measure(num_envs: int, rollout: int, hidden_size: int, device: torch.device, seconds: float, seed: int = 0) -> dict:
    """RecurrentPPO on the maze doing the work of one A2C update per rollout: frames and seconds
    timed, of them the seconds acting, seconds per update, and torch's threads."""
    env = NativeVecEnv(envs.env_id("maze"), num_envs, seed)
    model = RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=rollout, batch_size=rollout * num_envs, n_epochs=1, device=device, seed=seed,
        policy_kwargs=dict(lstm_hidden_size=hidden_size, n_lstm_layers=1, shared_lstm=True, enable_critic_lstm=False,
                           net_arch=[], features_extractor_class=IntFlattenExtractor),
    )
    clock = Clock(seconds)
    model.learn(total_timesteps=10**12, callback=clock)
    env.close()
    starts, ends = clock.starts[1:], clock.ends[1:]  # drop the warm-up update
    updates = len(starts) - 1  # the last start opened the rollout that was stopped
    elapsed = starts[-1] - starts[0]
    acting = sum(end - start for start, end in zip(starts[:updates], ends[:updates]))
    return {"frames": updates * rollout * num_envs, "seconds": elapsed, "acting_s": acting, "update_s": elapsed / updates,
            "threads": torch.get_num_threads()}
