"""Does a maze agent remember where it saw the objects? Targets seen before against targets never seen.

    python -m experiments.maze_memory RUN_DIR [RUN_DIR ...]

Within an episode the maze and its objects stay put while the target colour changes each time one
is reached. An agent that remembers where it saw an object can go back to it; one that does not
must search again. This plays a trained agent (sampled actions, memory reset at the episode's
start, as evaluate.py does) on fresh mazes and, each time a new target colour is given, notes
whether that object has been in the agent's 3x3 view earlier in the episode (seen) or not
(unseen), how far it is (the oracle's fewest steps), and whether the agent gets there within
WINDOW steps. Targets given later than WINDOW steps before the episode's end are left out.

The memory gain is the success rate on seen targets minus that on unseen ones; the far gain is
the same over targets at least FAR steps away, where the 3x3 view cannot help and a remembered
place can. A memoryless agent's gain is not zero (a seen target is a place the agent has been,
which tells something about the way there whatever it remembers): the MLP's gain is the control,
and memory is at work where a core's gain is above it. The mean distances of the groups show how
much nearness there is to explain. WINDOW and FAR were chosen on the maze's seed 0 runs at 12M
frames (windows of 10-50 steps and distance splits looked at), before the other seeds were
probed: docs/experiments/mazes.md says so beside the numbers.

Used by mazes.py for every maze and easy-maze run; printed here for any such runs.
"""

from __future__ import annotations

import numpy as np
import torch

from agents.runtime.actors import LocalEnvs
from agents.evaluation import Run, evaluation_seeds, load_run
from agents.learners.rollout import Actor
from agents.runtime.seeding import seed_everything
from envs.maze import CELL_OBJECT, MazeRules
from envs.oracle import MazeOracle
from experiments.frame.analyse import UnfitRun, analyse_runs

EPISODES = 256  # fresh mazes, played side by side
WINDOW = 30  # steps a target is given to be reached in: the oracle needs about 8 on average, 30 at most
FAR = 9  # fewest steps from which a target counts as far
SEED = 30_000  # evaluation streams of seed 30,000: never training's, nor evaluation's or the corridor probe's


def target_outcomes(run: Run, episodes: int = EPISODES, seed: int = SEED) -> dict[str, np.ndarray]:
    """One entry per target given at least WINDOW steps before an episode's end: "seen" (bool,
    its object was in view before it was given), "reached" (bool, within WINDOW steps) and
    "distance" (the oracle's fewest steps to it when given)."""
    seed_everything(seed)
    pool = LocalEnvs(run.config.env, evaluation_seeds(seed, episodes), run.config.env_options)
    try:
        rules = getattr(pool.env, "rules", None)
        if not isinstance(rules, MazeRules):
            raise UnfitRun(f"the memory probe needs a maze or easy-maze run, not {run.config.env!r}")
        actor = Actor(pool, run.policy, run.device)  # fresh episodes in every env, memory empty
        oracle = MazeOracle(rules)
        horizon = rules.max_episode_steps
        rows = np.arange(episodes)
        seen = np.zeros((episodes, rules.num_objects), dtype=bool)  # objects in view so far
        given_at = np.zeros(episodes, dtype=np.int64)  # the step the current target was given
        given_seen = np.zeros(episodes, dtype=bool)  # the first target is given before anything is seen
        given_distance = oracle.steps_to_target()
        outcomes = {"seen": [], "reached": [], "distance": []}

        def close(envs: np.ndarray, reached: bool, step: int) -> None:
            """End the current target's record in `envs` (reached at `step`, or the episode ended)."""
            kept = envs[given_at[envs] <= horizon - WINDOW]
            outcomes["seen"].append(given_seen[kept])
            outcomes["reached"].append(np.full(len(kept), reached) & (step + 1 - given_at[kept] <= WINDOW))
            outcomes["distance"].append(given_distance[kept])

        for step in range(horizon):
            view = actor.obs[:, :9]  # this step's 3x3 view, before acting
            for colour in range(rules.num_objects):
                seen[:, colour] |= (view == CELL_OBJECT + colour).any(axis=1)
            record, _ = actor.step()
            if step == horizon - 1:  # the time limit: every episode ends here, together
                close(rows, False, step)
                break
            hit = np.flatnonzero(record["reward"] > 0)
            if len(hit):
                close(hit, True, step)
                given_at[hit] = step + 1
                given_seen[hit] = seen[hit, rules.target[hit]]
                given_distance[hit] = oracle.steps_to_target()[hit]
    finally:
        pool.close()
    return {key: np.concatenate(parts) for key, parts in outcomes.items()}


def memory_probe(run_dir: str) -> dict[str, float]:
    """Per group (seen, unseen): the targets, the share reached within WINDOW steps and their mean
    distance; the gain (the seen group's share minus the unseen group's), and the far gain, the
    same over targets at least FAR steps away."""
    run = load_run(run_dir, torch.device("cpu"))
    outcomes = target_outcomes(run)
    seen, reached, far = outcomes["seen"], outcomes["reached"], outcomes["distance"] >= FAR
    share = lambda group: float(reached[group].mean()) if group.any() else float("nan")  # noqa: E731
    result = {}
    for name, group in (("seen", seen), ("unseen", ~seen)):
        result[f"{name}_targets"] = int(group.sum())
        result[f"{name}_reached"] = share(group)
        result[f"{name}_distance"] = float(outcomes["distance"][group].mean()) if group.any() else float("nan")
    result["gain"] = result["seen_reached"] - result["unseen_reached"]
    result["far_targets"] = int(far.sum())
    result["far_gain"] = share(seen & far) - share(~seen & far)
    return result


def report(run_dir: str) -> None:
    r = memory_probe(run_dir)
    print(f"{run_dir}: reached within {WINDOW} steps: seen {r['seen_reached']:.2f} ({r['seen_targets']} targets, "
          f"{r['seen_distance']:.1f} steps away), unseen {r['unseen_reached']:.2f} ({r['unseen_targets']}, "
          f"{r['unseen_distance']:.1f} away); gain {r['gain']:+.2f}, {r['far_gain']:+.2f} on the {r['far_targets']} "
          f"targets {FAR}+ steps away")


def main(argv: list[str] | None = None) -> None:
    analyse_runs(__doc__, "maze or easy-maze run folders (or checkpoint files)", report, argv)


if __name__ == "__main__":
    main()
