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
from agents.evaluation import evaluation_seeds, load_run, new_policy
from agents.model.policy import Policy
from agents.runtime.seeding import seed_everything
from envs.corridor import ENTER_LOWER, ENTER_UPPER, FORWARD
from experiments.frame.analyse import UnfitRun, analyse_runs

EPISODES = 64  # fresh corridors, walked side by side; cue and door order drawn by the env
SEED = 20_000  # evaluation streams of seed 20,000: never training's, nor those experiments evaluate on


class CorridorWalk(NamedTuple):
    """Corridors walked straight down to the step their doors come into view."""

    obs: np.ndarray  # (T, N, 3) observations from the start cell to the doors: cue, upper door, lower door
    cue: np.ndarray  # (N,) 1 blue, 2 green
    upper: np.ndarray  # (N,) the upper door's colour

    @property
    def correct(self) -> np.ndarray:
        """(N,) the action that enters the cue's door."""
        return np.where(self.upper == self.cue, ENTER_UPPER, ENTER_LOWER)


def walk_to_doors(env_options: dict, episodes: int = EPISODES) -> CorridorWalk:
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
    return CorridorWalk(np.stack(seen), seen[0][:, 0].copy(), seen[-1][:, 1].copy())


def walk_inputs(policy: Policy, walk: CorridorWalk) -> tuple[torch.Tensor, torch.Tensor]:
    """The core's inputs along the walk, x (T, N, input_dim), and the episode starts, first (T, N)."""
    device = next(policy.parameters()).device
    steps, episodes, _ = walk.obs.shape
    prev_action = torch.full((steps, episodes), FORWARD, device=device)
    prev_action[0] = policy.num_actions  # "none" at the start
    prev_reward = torch.zeros(steps, episodes, device=device)
    first = torch.zeros(steps, episodes, dtype=torch.bool, device=device)
    first[0] = True
    return policy.encode(torch.as_tensor(walk.obs, device=device), prev_action, prev_reward), first


@torch.no_grad()
def door_outputs(policy: Policy, walk: CorridorWalk) -> np.ndarray:
    """The core's output (the vector the actor and critic heads read) at the doors, (N, D)."""
    x, first = walk_inputs(policy, walk)
    y, _ = policy.core(x, policy.initial_state(x.shape[1], x.device), first)  # (T, N, D)
    return y[-1].cpu().numpy()


def separation(vectors: np.ndarray, walk: CorridorWalk) -> float:
    """|mean vector (blue cue) - mean vector (green cue)| / mean |vector|, averaged over the door
    orders the walk drew (one with fixed doors): vectors (N, D), one per walked corridor."""
    gaps = [np.linalg.norm(vectors[(walk.cue == 1) & (walk.upper == u)].mean(0) - vectors[(walk.cue == 2) & (walk.upper == u)].mean(0))
            for u in np.unique(walk.upper)]
    return float(np.mean(gaps) / np.linalg.norm(vectors, axis=1).mean())


def cue_separation(policy: Policy, env_options: dict) -> float:
    """The separation of the core's outputs at the doors (see the module docstring)."""
    walk = walk_to_doors(env_options)
    return separation(door_outputs(policy, walk), walk)


def run_cue_separation(run_dir: str) -> dict[str, float]:
    """{"trained": separation of the run's final policy, "fresh": of a fresh policy of its config and seed}."""
    run = load_run(run_dir, torch.device("cpu"))
    if run.config.env != "corridor":
        raise UnfitRun(f"{run_dir} was trained on {run.config.env!r}; the cue separation needs a corridor run")
    seed_everything(run.config.seed)
    fresh = new_policy(run.config).eval()
    return {"trained": cue_separation(run.policy, run.config.env_options), "fresh": cue_separation(fresh, run.config.env_options)}


def report(run_dir: str) -> None:
    result = run_cue_separation(run_dir)
    print(f"{run_dir}: cue separation at the doors {result['trained']:.2e} (fresh policy: {result['fresh']:.2e})")


def main(argv: list[str] | None = None) -> None:
    analyse_runs(__doc__, "corridor run folders (or checkpoint files)", report, argv)


if __name__ == "__main__":
    main()
