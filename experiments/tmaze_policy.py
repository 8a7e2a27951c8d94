"""What a trained T-maze agent does, read run by run: does it walk, reach the junction, turn, and
turn the right way?

    python -m experiments.tmaze_policy runs/experiments/memory_length_tmaze/lstm/L8/seed0 [more runs]

Two probes, one episode per goal side each (seeded):
- along the right path: the env is walked by its oracle (envs/oracle.py) while the agent's policy
  reads the same observations with its memory carried, so its action probabilities are read at
  every cell the task needs it to pass, whatever it would have done itself;
- on its own path: the agent acts greedily itself.

`reading` sums them up in four booleans, each over both goal sides, which
experiments/memory_length.py puts into its sweep's JSON for every run:
- `walks`: on the right path its most likely action is "right" at every corridor cell;
- `reaches_junction`: acting greedily itself, it stands at the junction by step L;
- `turns`: at the junction on the right path its most likely action is up or down;
- `turns_right_way`: ... and it is the goal's side.
An agent that walks but does not turn fails to explore the turn; one that turns the wrong way
for one side forgot (or never learnt) the cue.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import torch

import envs
from agents.evaluation import Run, load_run
from agents.model.step_inputs import StepInputs
from envs.oracle import make_oracle
from experiments.frame.analyse import UnfitRun, analyse_runs

ACTIONS = ("right", "up", "left", "down")
RIGHT, UP, DOWN = ACTIONS.index("right"), ACTIONS.index("up"), ACTIONS.index("down")
SIDE_ACTION = {"up": UP, "down": DOWN}


def tmaze_run(run_dir: str) -> tuple[Run, int]:
    """The run's policy and its T-maze length; a ValueError naming any other env."""
    run = load_run(run_dir, torch.device("cpu"))
    if envs.short_name(run.config.env) != "tmaze":
        raise UnfitRun(f"{run_dir} was trained on {run.config.env!r}; this probe reads the T-maze (tmaze)")
    return run, run.config.env_options.get("length", 10)


def episodes(run: Run, length: int, follow_oracle: bool, goal_seed: int = 0) -> dict[str, tuple[list[list[float]], list[np.ndarray]]]:
    """{goal side: (the policy's action probabilities at each of the L + 1 steps, the observation
    after each step)} for one episode per side (seeds from `goal_seed` until both came up), the
    actions the oracle's or the agent's own greedy ones."""
    env = gym.make(envs.env_id("tmaze"), **{"length": length, **run.config.env_options})
    oracle, sides, seed = make_oracle(env), {}, goal_seed
    while len(sides) < 2:
        obs, _ = env.reset(seed=seed)
        seed += 1
        side = "up" if obs[1] == 1 else "down"
        if side in sides:
            continue
        state = run.policy.initial_state(1, "cpu")
        prev_action, prev_reward, probabilities, seen = run.policy.num_actions, 0.0, [], []
        for t in range(length + 1):
            inputs = StepInputs(torch.as_tensor(obs)[None, None], torch.tensor([[prev_action]]), torch.tensor([[prev_reward]]),
                                torch.tensor([[t == 0]]))
            with torch.no_grad():
                logits, _, state = run.policy(inputs, state)
            probabilities.append(torch.softmax(logits[0, 0].float(), -1).tolist())
            prev_action = int(oracle()[0]) if follow_oracle else int(np.argmax(probabilities[-1]))
            obs, prev_reward, _, _, _ = env.step(prev_action)
            seen.append(obs)
        sides[side] = (probabilities, seen)
    env.close()
    return sides


def probabilities_along_the_path(run_dir: str, goal_seed: int = 0) -> dict[str, dict[str, list[float]]]:
    """{goal side: {"start" | "middle" | "junction": P(action) over ACTIONS}} of the run's policy
    on the oracle's path."""
    run, length = tmaze_run(run_dir)
    return {side: {"start": steps[0], "middle": steps[length // 2], "junction": steps[length]}
            for side, (steps, _) in episodes(run, length, follow_oracle=True, goal_seed=goal_seed).items()}


def reading(run_dir: str, goal_seed: int = 0) -> dict[str, bool]:
    """The run's four booleans (see the module docstring), each over both goal sides."""
    run, length = tmaze_run(run_dir)
    right_path = episodes(run, length, follow_oracle=True, goal_seed=goal_seed)
    own_path = episodes(run, length, follow_oracle=False, goal_seed=goal_seed)
    chosen = {side: [int(np.argmax(p)) for p in steps] for side, (steps, _) in right_path.items()}
    return {
        "walks": all(actions[t] == RIGHT for actions in chosen.values() for t in range(length)),
        "reaches_junction": all(any(obs[0] == 1 for obs in seen[:length]) for _, seen in own_path.values()),
        "turns": all(actions[length] in (UP, DOWN) for actions in chosen.values()),
        "turns_right_way": all(actions[length] == SIDE_ACTION[side] for side, actions in chosen.items()),
    }


def report(run_dir: str) -> None:
    """The run's action probabilities along the path, a line per goal side, then its reading as
    one JSON line, the last (experiments/memory_length.py reads it from a job's record)."""
    for side, places in probabilities_along_the_path(run_dir).items():
        shown = "; ".join(f"{place} " + " ".join(f"{a} {p:.3f}" for a, p in zip(ACTIONS, probs)) for place, probs in places.items())
        print(json.dumps({"run": run_dir, "goal": side}), shown)
    print(json.dumps({"run": run_dir, **reading(run_dir)}))


def main(argv: list[str] | None = None) -> None:
    analyse_runs(__doc__, "run folders (or checkpoints) of T-maze agents", report, argv)


if __name__ == "__main__":
    main()
