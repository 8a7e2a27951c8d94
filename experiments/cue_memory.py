"""How much of the corridor's cue a trained agent's memory still holds when it reaches the doors.

    python -m experiments.cue_memory RUN_DIR [RUN_DIR ...]

Success on the corridor says whether an agent used the cue; this says whether its core could
have: the agent is walked straight down fresh corridors (forward at every step, so every episode
sees the same inputs but the cue and the door order), and at the step the doors come into view
we compare the core's outputs (the vector the actor and critic heads read) between blue-cue and
green-cue episodes with the same door order. The cue separation is the distance between the two
mean outputs over the outputs' mean norm: 0 when the core has forgotten the cue, around 1 when
it is a large part of what the core says. The same measure of a fresh policy of the run's config
and seed (before any update) shows what training did to the memory.

Used by corridor_span.py for every run; printed here for any corridor runs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from agents.runtime.actors import LocalEnvs
from agents.evaluation import Run, evaluation_seeds, load_run, new_policy
from agents.model.policy import Policy
from agents.runtime.seeding import seed_everything
from envs.corridor import ENTER_LOWER, ENTER_UPPER, FORWARD
from experiments.frame.analyse import UnfitRun, analyse_runs

EPISODES = 64  # fresh corridors, walked side by side; cue and door order drawn by the env
SEED = 20_000  # evaluation streams of seed 20,000: never training's, nor those experiments evaluate on


class CueWalk(NamedTuple):
    """Episodes walked side by side to the step where their cue must be used: the corridor's to
    the step its doors come into view (forward at every step), the memory length task's to the
    step that asks for its bit (walk_to_query)."""

    obs: np.ndarray  # (T, N, features) from the first observation to the one the decision is taken on
    cue: np.ndarray  # (N,) 1 or 2: the corridor's cue (blue, green), the recall task's asked bit (0, 1) as shown
    group: np.ndarray  # (N,) what else the right action depends on (the upper door's colour; the query): cues are compared within one
    correct: np.ndarray  # (N,) the action the cue calls for at the last step
    action: int  # the action taken at every step before the last (the previous action of the next)


def walk_to_doors(env_options: dict, episodes: int = EPISODES) -> CueWalk:
    """Walk `episodes` fresh corridors forward (evaluation streams of SEED) until their doors
    are in view; every corridor walked straight reaches them at the same step."""
    envs = LocalEnvs("corridor", evaluation_seeds(SEED, episodes), env_options)
    try:
        seen = [envs.reset()]  # (N, 3) each
        while not (seen[-1][:, 1] != 0).all():
            obs, _, terminated, truncated, _ = envs.step(np.full(episodes, FORWARD))
            if (terminated | truncated).any():
                raise RuntimeError("an episode ended before its doors came into view; is the time limit shorter than the corridor?")
            seen.append(obs)
    finally:
        envs.close()
    cue, upper = seen[0][:, 0].copy(), seen[-1][:, 1].copy()
    return CueWalk(np.stack(seen), cue, upper, np.where(upper == cue, ENTER_UPPER, ENTER_LOWER), FORWARD)


def walk_to_query(env_options: dict, episodes: int = EPISODES) -> CueWalk:
    """`episodes` fresh episodes of the memory length task (envs/memory_length.py; evaluation
    streams of SEED), answered 0 until the step that shows the query (t = L): the bits at the
    first step, the query at the last, nothing between."""
    envs = LocalEnvs("memory_length", evaluation_seeds(SEED, episodes), env_options)
    try:
        seen = [envs.reset()]  # (N, [time,] query, bits...) each
        query_at = 0 if env_options.get("show_time") is False else 1  # the query's feature
        while not (seen[-1][:, query_at] != 0).all():
            obs, _, terminated, truncated, _ = envs.step(np.zeros(episodes, dtype=np.int64))
            if (terminated | truncated).any():
                raise RuntimeError("an episode ended before its query was shown; is the time limit shorter than the task?")
            seen.append(obs)
    finally:
        envs.close()
    query = seen[-1][:, query_at] - 1  # (N,) the asked bit's index
    cue = seen[0][np.arange(episodes), query_at + 1 + query]  # 1 + the asked bit, as the first step showed it
    return CueWalk(np.stack(seen), cue, query, cue - 1, 0)


WALKS = {"corridor": walk_to_doors, "memory_length": walk_to_query}  # env -> its walk


def walk_inputs(policy: Policy, walk: CueWalk) -> tuple[torch.Tensor, torch.Tensor]:
    """The core's inputs along the walk, x (T, N, input_dim), and the episode starts, first (T, N)."""
    device = next(policy.parameters()).device
    steps, episodes, _ = walk.obs.shape
    prev_action = torch.full((steps, episodes), walk.action, device=device)
    prev_action[0] = policy.num_actions  # "none" at the start
    prev_reward = torch.zeros(steps, episodes, device=device)
    first = torch.zeros(steps, episodes, dtype=torch.bool, device=device)
    first[0] = True
    return policy.encode(torch.as_tensor(walk.obs, device=device), prev_action, prev_reward), first


@torch.no_grad()
def door_outputs(policy: Policy, walk: CueWalk) -> np.ndarray:
    """The core's output (the vector the actor and critic heads read) at the walk's last step (the doors, the query), (N, D)."""
    x, first = walk_inputs(policy, walk)
    y, _ = policy.core(x, policy.initial_state(x.shape[1], x.device), first)  # (T, N, D)
    return y[-1].cpu().numpy()


def cue_gap(vectors: np.ndarray, walk: CueWalk) -> float:
    """|mean vector (cue 1) - mean vector (cue 2)|, averaged over the walk's groups (the door
    orders it drew, one with fixed doors): vectors (N, D), one per episode."""
    return float(np.mean([np.linalg.norm(vectors[(walk.cue == 1) & (walk.group == g)].mean(0) - vectors[(walk.cue == 2) & (walk.group == g)].mean(0))
                          for g in np.unique(walk.group)]))


def separation(vectors: np.ndarray, walk: CueWalk) -> float:
    """cue_gap over the vectors' mean norm: vectors (N, D), one per episode."""
    return cue_gap(vectors, walk) / float(np.linalg.norm(vectors, axis=1).mean())


def cue_separation(policy: Policy, env_options: dict) -> float:
    """The separation of the core's outputs at the doors (see the module docstring)."""
    walk = walk_to_doors(env_options)
    return separation(door_outputs(policy, walk), walk)


def trained_and_fresh(run_dir: str, envs: tuple[str, ...]) -> tuple[Run, Policy]:
    """The run (its final policy) and a fresh policy of its config and seed, as it was before
    any update; UnfitRun unless the run's env is one of `envs`."""
    run = load_run(run_dir, torch.device("cpu"))
    if run.config.env not in envs:
        raise UnfitRun(f"{run_dir} was trained on {run.config.env!r}; this needs a run on {' or '.join(map(repr, envs))}")
    seed_everything(run.config.seed)
    return run, new_policy(run.config).eval()


def run_cue_separation(run_dir: str) -> dict[str, float]:
    """{"trained": separation of the run's final policy, "fresh": of a fresh policy of its config and seed}."""
    run, fresh = trained_and_fresh(run_dir, ("corridor",))
    return {"trained": cue_separation(run.policy, run.config.env_options), "fresh": cue_separation(fresh, run.config.env_options)}


def report(run_dir: str) -> None:
    result = run_cue_separation(run_dir)
    print(f"{run_dir}: cue separation at the doors {result['trained']:.2e} (fresh policy: {result['fresh']:.2e})")


def main(argv: list[str] | None = None) -> None:
    analyse_runs(__doc__, "corridor run folders (or checkpoint files)", report, argv)


if __name__ == "__main__":
    main()
