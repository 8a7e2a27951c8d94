"""Playing whole episodes with a policy, no learning: what evaluate.py and the trainers' solve
check (agents/learners/solve.py) score a policy by.

`play_episodes` runs it on B envs through the same `Actor` the trainer acts with, so memory is
carried step to step and forgotten at each episode's first step exactly as in training; each env
contributes a fixed quota of its first episodes, as envs/baselines.py:run_episodes does for the
random and oracle policies, so short episodes are not over-represented and the numbers compare
one to one. Its envs draw evaluation streams (agents/runtime/seeding.py:env_seeds), never those
of a training run, whatever the seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.learners.dqn.acting import EpsilonGreedyActor
from agents.learners.rollout import Actor
from agents.model.policy import Policy
from agents.runtime.actors import LocalEnvs
from agents.runtime.seeding import env_seeds, seed_everything


def evaluation_seeds(seed: int, num_envs: int) -> list[int]:
    """The reset seeds of evaluation envs 0 .. num_envs - 1 under `seed`: never a training run's."""
    return env_seeds(seed, range(num_envs), "evaluation")


def playing_actor(pool, policy: Policy, device: torch.device, epsilon: float | None) -> Actor:
    """The Actor that plays `policy` on `pool`: without --greedy it samples from the policy's
    distribution (A2C, PPO), or, given an `epsilon` (a DQN's Q head), acts epsilon-greedy as the
    DQN trainer does: a softmax over Q values is a policy no DQN run ever acted with."""
    if epsilon is None:
        return Actor(pool, policy, device)
    actor = EpsilonGreedyActor(pool, policy, device)
    actor.epsilon = epsilon
    return actor


def play_episodes(policy: Policy, device: torch.device, env: str, env_options: dict[str, Any], episodes: int, seed: int,
                  num_envs: int, greedy: bool, epsilon: float | None = None) -> dict[str, np.ndarray]:
    """(episodes,) arrays of return, length and the env's metrics; env i draws evaluation stream
    i of `seed` and gives its first `episodes // num_envs` episodes (one more for the first
    remainder envs). Not greedy, the actions are sampled, or epsilon-greedy given `epsilon`
    (see playing_actor).

    Sampled actions draw from torch's global generator, seeded here, so a seed fixes the result
    in every mode (a caller that must not disturb its own draws saves and restores the
    generators around the call, as the solve check does).
    """
    if episodes < 1 or num_envs < 1:
        raise ValueError(f"episodes and num_envs must be >= 1, got {episodes} and {num_envs}")
    seed_everything(seed)
    pool = LocalEnvs(env, evaluation_seeds(seed, num_envs), env_options)
    try:
        actor = playing_actor(pool, policy, device, epsilon)
        quota = np.full(num_envs, episodes // num_envs) + (np.arange(num_envs) < episodes % num_envs)
        results: dict[str, list[float]] = {}
        while quota.sum() > 0:
            record, ended = actor.step(greedy)
            # `ended` lists the envs that ended on this step in index order
            for k, i in enumerate(np.flatnonzero(record["terminated"] | record["truncated"])):
                if quota[i] > 0:
                    for key, values in ended.values.items():
                        results.setdefault(key, []).append(values[k])
                    quota[i] -= 1
    finally:
        pool.close()
    return {key: np.asarray(values, dtype=np.float64) for key, values in results.items()}
