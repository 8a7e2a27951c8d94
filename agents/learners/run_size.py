"""What a run's sizes ask of memory, checked before anything is allocated.

`--num-envs 1e12` or `--rollout 1e12` used to hang in making the envs or the rollout's storage,
and a huge `--embed-dim` or core width ended in an allocator's traceback. The trainer and
evaluate.py check these estimates against the memory available (agents/runtime/memory_budget.py)
first and refuse with the estimate. The estimates are lower bounds, so no run that fits is ever
refused: an env's state and generator take at least ENV_BYTES; a step of one env in the rollout
at least its embedding in float32 plus STEP_BYTES of action, reward, value and flags; an evaluated
episode at least EPISODE_BYTES of results; the policy its parameters, trained (built on the meta
device to count them: memory_budget.check_model_fits).
"""

from __future__ import annotations

from agents.runtime.memory_budget import check_fits

ENV_BYTES = 1024  # an env's state arrays and its numpy generator
STEP_BYTES = 16  # a stored step's action, reward, value and flags, beyond its embedding
EPISODE_BYTES = 3 * 32  # an episode's return, length and metric, as Python floats in lists


def check_run_fits(num_envs: int, rollout: int, embed_dim: int) -> None:
    """TooLarge if `num_envs` envs and a rollout of `rollout` steps of them (embedded in
    `embed_dim` floats) cannot fit in the memory available."""
    check_fits(f"--num-envs {num_envs:,}", num_envs * ENV_BYTES, "lower --num-envs")
    check_fits(f"a rollout of --rollout {rollout:,} steps of --num-envs {num_envs:,} envs",
               rollout * num_envs * (4 * embed_dim + STEP_BYTES), "lower --rollout, --num-envs or --embed-dim")


def check_evaluation_fits(episodes: int, num_envs: int) -> None:
    """TooLarge if evaluating `episodes` episodes on `num_envs` envs cannot fit in the memory available."""
    check_fits(f"--num-envs {num_envs:,}", num_envs * ENV_BYTES, "lower --num-envs")
    check_fits(f"keeping the results of --episodes {episodes:,}", episodes * EPISODE_BYTES, "lower --episodes")
