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

import argparse

import numpy as np
import torch

from agents.actors import LocalEnvs
from agents.evaluation import evaluation_seeds, load_run, new_policy
from agents.policy import Policy
from agents.seeding import seed_everything
from envs.corridor import FORWARD

EPISODES = 64  # fresh corridors, walked side by side; cue and door order drawn by the env
SEED = 20_000  # evaluation streams of seed 20,000: never training's, nor those experiments evaluate on


@torch.no_grad()
def door_outputs(policy: Policy, env_options: dict, episodes: int = EPISODES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Walk `episodes` corridors forward to their doors: the core's output there (N, D), the
    cue (N,) and the upper door's colour (N,) (1 blue, 2 green)."""
    envs = LocalEnvs("corridor", evaluation_seeds(SEED, episodes), env_options)
    try:
        obs = envs.reset()  # (N, 3): cue, upper door, lower door
        cue = obs[:, 0].copy()
        device = next(policy.parameters()).device
        state = policy.initial_state(episodes, device)
        prev_action = torch.full((episodes,), policy.num_actions, device=device)  # "none" at the start
        prev_reward = torch.zeros(episodes, device=device)
        first = torch.ones(episodes, dtype=torch.bool, device=device)
        forward = np.full(episodes, FORWARD)
        while True:
            x = policy.encode(torch.as_tensor(obs, device=device)[None], prev_action[None], prev_reward[None])
            y, state = policy.core(x, state, first[None])  # y: (1, N, D)
            if (obs[:, 1] != 0).all():  # every corridor walked straight reaches its doors at the same step
                return y[0].cpu().numpy(), cue, obs[:, 1].copy()
            obs, _, terminated, truncated, _ = envs.step(forward)
            if (terminated | truncated).any():
                raise RuntimeError("an episode ended before its doors came into view; is the time limit shorter than the corridor?")
            prev_action = torch.full((episodes,), FORWARD, device=device)
            first = torch.zeros(episodes, dtype=torch.bool, device=device)
    finally:
        envs.close()


def cue_separation(policy: Policy, env_options: dict) -> float:
    """|mean output (blue cue) - mean output (green cue)| / mean |output| at the doors, averaged
    over the two door orders (see the module docstring)."""
    outputs, cue, upper = door_outputs(policy, env_options)
    scale = np.linalg.norm(outputs, axis=1).mean()
    gaps = [np.linalg.norm(outputs[(cue == 1) & (upper == u)].mean(0) - outputs[(cue == 2) & (upper == u)].mean(0)) for u in (1, 2)]
    return float(np.mean(gaps) / scale)


def run_cue_separation(run_dir: str) -> dict[str, float]:
    """{"trained": separation of the run's final policy, "fresh": of a fresh policy of its config and seed}."""
    run = load_run(run_dir, torch.device("cpu"))
    if run.config.env != "corridor":
        raise ValueError(f"{run_dir} was trained on {run.config.env!r}; the cue separation needs a corridor run")
    seed_everything(run.config.seed)
    fresh = new_policy(run.config).eval()
    return {"trained": cue_separation(run.policy, run.config.env_options), "fresh": cue_separation(fresh, run.config.env_options)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="corridor run folders (or checkpoint files)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for run_dir in args.runs:
        result = run_cue_separation(run_dir)
        print(f"{run_dir}: cue separation at the doors {result['trained']:.2e} (fresh policy: {result['fresh']:.2e})")


if __name__ == "__main__":
    main()
