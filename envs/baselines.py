"""The bounds a learned policy is judged between: a uniformly random policy and the oracle.

    python -m envs.baselines --env maze --episodes 100 --seed 0

prints, for each policy, the mean and spread of the episodic return and the env's metric
(corridor success, targets or goals reached). `run_episodes` is what evaluate.py reuses.
"""

from __future__ import annotations

import argparse
from typing import Callable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

import envs
from envs.any_env import make_vector_env, metric_keys, metric_values
from envs.cli import env_name, env_seed, positive_int
from envs.oracle import make_oracle

POLICIES = ("random", "oracle")


def policies(name: str) -> tuple[str, ...]:
    """The baselines env `name` has: both for our envs, only random for any other (no oracle)."""
    return POLICIES if envs.is_native(name) else ("random",)


def random_policy(env: gym.vector.VectorEnv, seed: int | list[int] | None) -> Callable[[], np.ndarray]:
    """Uniformly random actions for every env of the batch."""
    rng = np.random.default_rng(seed)
    space, size = env.single_action_space, env.num_envs
    return lambda: space.start + rng.integers(0, space.n, size=size)


def run_episodes(env: gym.vector.VectorEnv, act: Callable[[], np.ndarray], episodes: int, keys: list[str]) -> dict[str, np.ndarray]:
    """Run `act` until `episodes` episodes have ended; (episodes,) arrays of return, length and
    the metrics `keys` (NaN where an episode's final info lacks one).

    `env` must autoreset in the same step (AutoresetMode.SAME_STEP). Each env contributes a
    fixed quota of its first episodes, so short episodes are not over-represented.
    """
    if env.metadata["autoreset_mode"] != AutoresetMode.SAME_STEP:
        raise ValueError("run_episodes needs a vector env with autoreset_mode SAME_STEP")
    quota = np.full(env.num_envs, episodes // env.num_envs) + (np.arange(env.num_envs) < episodes % env.num_envs)
    running = np.zeros(env.num_envs)
    results: dict[str, list] = {"return": [], "length": [], **{key: [] for key in keys}}
    lengths = np.zeros(env.num_envs, dtype=np.int64)
    while quota.sum() > 0:
        _, reward, terminated, truncated, info = env.step(act())
        running += reward
        lengths += 1
        for i in np.flatnonzero((terminated | truncated) & (quota > 0)):
            results["return"].append(running[i])
            results["length"].append(lengths[i])
            for key in keys:
                results[key].append(metric_values(info["final_info"], key, env.num_envs)[i])
            quota[i] -= 1
        running[terminated | truncated] = 0.0
        lengths[terminated | truncated] = 0
    return {key: np.asarray(values, dtype=np.float64) for key, values in results.items()}


def evaluate_baseline(name: str, policy: str, episodes: int, seed: int | list[int], num_envs: int = 16, **env_kwargs) -> dict[str, np.ndarray]:
    """Episodes of the random or oracle policy on env `name` (short name, id or module:EnvId;
    the oracle only for our envs, see `policies`). seed: an int s seeds env i with s + i, as
    Gymnasium's vector envs do; a list of `num_envs` seeds gives each env its own (evaluate.py
    passes the agent's evaluation seeds, so the baselines play the agent's episodes)."""
    if policy not in policies(name):
        raise ValueError(f"unknown policy {policy!r} for env {name!r}; choose from {list(policies(name))}")
    env = make_vector_env(name, num_envs, AutoresetMode.SAME_STEP, **env_kwargs)
    keys = metric_keys(env.reset(seed=seed)[1], num_envs)
    act = random_policy(env, seed) if policy == "random" else make_oracle(env)
    try:
        return run_episodes(env, act, episodes, keys)
    finally:
        env.close()


def summary(results: dict[str, np.ndarray]) -> str:
    """One line: mean ± standard deviation of each quantity."""
    return "  ".join(f"{key} {values.mean():.3f} ± {values.std():.3f}" for key, values in results.items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", type=env_name, default="maze", help=f"one of {sorted(envs.ENV_IDS)} or any registered Gymnasium id (module:EnvId)")
    parser.add_argument("--episodes", type=positive_int, default=100)
    parser.add_argument("--num-envs", type=positive_int, default=16)
    parser.add_argument("--seed", type=env_seed, default=0)
    args = parser.parse_args(argv)
    name = envs.env_id(args.env)
    for policy in policies(args.env):
        results = evaluate_baseline(args.env, policy, args.episodes, args.seed, args.num_envs)
        print(f"{name} {policy:>6}: {summary(results)}")


if __name__ == "__main__":
    main()
