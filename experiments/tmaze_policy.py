"""What a trained T-maze agent would do along the right path: its action probabilities at the start,
mid-corridor and at the junction, for each goal side.

    python -m experiments.tmaze_policy runs/experiments/memory_length_tmaze/lstm/L8/seed0 [more runs]

The env is walked by its oracle (envs/oracle.py) while the agent's policy reads the same
observations with its memory carried, so the probabilities are the agent's at the cells the
task needs it to pass, whatever it would have done itself. An agent that walks but never turns
has P(right) near 1 at the junction: at the last step it plays into the wall (evaluation's
`arrived` 0), a failure to explore the turn, not to remember the side.
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym
import torch

import envs
from agents.evaluation import load_run
from envs.oracle import make_oracle

ACTIONS = ("right", "up", "left", "down")


def probabilities_along_the_path(run_dir: str, goal_seed: int = 0) -> dict[str, dict[str, list[float]]]:
    """{goal side: {"start" | "middle" | "junction": P(action) over ACTIONS}} of the run's policy on
    the oracle's path, one episode per goal side (seeds from `goal_seed` until both sides came up)."""
    run = load_run(run_dir, torch.device("cpu"))
    if envs.short_name(run.config.env) != "tmaze":
        raise ValueError(f"{run_dir} was trained on {run.config.env!r}; this probe reads the T-maze (tmaze)")
    length = run.config.env_options.get("length", 10)
    env = gym.make(envs.env_id("tmaze"), length=length)
    oracle, sides, seed = make_oracle(env), {}, goal_seed
    while len(sides) < 2:
        obs, _ = env.reset(seed=seed)
        seed += 1
        side = "up" if obs[1] == 1 else "down"
        if side in sides:
            continue
        state = run.policy.initial_state(1, "cpu")
        prev_action, prev_reward, steps = run.policy.num_actions, 0.0, []
        for t in range(length + 1):
            inputs = (torch.as_tensor(obs)[None, None], torch.tensor([[prev_action]]), torch.tensor([[prev_reward]]),
                      torch.tensor([[t == 0]]))
            with torch.no_grad():
                logits, _, state = run.policy(*inputs, state)
            steps.append(torch.softmax(logits[0, 0].float(), -1).tolist())
            prev_action = int(oracle()[0])  # the oracle's (1,) action
            obs, prev_reward, _, _, _ = env.step(prev_action)
        sides[side] = {"start": steps[0], "middle": steps[length // 2], "junction": steps[length]}
    return sides


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run folders (or checkpoints) of T-maze agents")
    args = parser.parse_args(argv)
    for run_dir in args.runs:
        for side, places in probabilities_along_the_path(run_dir).items():
            shown = "; ".join(f"{place} " + " ".join(f"{a} {p:.3f}" for a, p in zip(ACTIONS, probs)) for place, probs in places.items())
            print(json.dumps({"run": run_dir, "goal": side}), shown)


if __name__ == "__main__":
    main()
