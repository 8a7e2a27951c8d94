"""Env streams (agents/runtime/seeding.py:env_seeds): no two runs, restarts or evaluations share one, and
a share of the batch (a torchrun rank's, an actor worker's) is seeded as the whole batch is."""

import numpy as np
import pytest

from agents.config.a2c_config import resolve_config
from agents.runtime.actors import LocalEnvs
from agents.evaluation import evaluation_seeds
from agents.runtime.seeding import env_seeds
from agents.learners.train import Trainer

SEEDS, NUM_ENVS = range(10), 64  # an experiment's runs
RESTARTS = (0, 4096, 8192)  # a new run's episodes, and fresh ones started by two resumes
# Every step ends an episode or starts one, so each env draws a cue and a door order every two steps.
CORRIDOR = {"length": 2, "max_episode_steps": 1}


def test_ten_runs_their_restarts_and_their_evaluations_draw_distinct_seeds():
    training = [s for seed in SEEDS for restart in RESTARTS for s in env_seeds(seed, range(NUM_ENVS), "training", restart)]
    evaluation = [s for seed in SEEDS for s in evaluation_seeds(seed, NUM_ENVS)]
    assert len(set(training)) == len(training) == len(SEEDS) * len(RESTARTS) * NUM_ENVS
    assert len(set(evaluation)) == len(evaluation)
    assert max(training) < 2**31 <= min(evaluation) and max(evaluation) < 2**32  # the top bit: the purpose


def test_a_share_of_the_batch_is_seeded_as_the_whole_batch():
    whole = env_seeds(3, range(12), "training", restart=96)
    assert env_seeds(3, range(4, 8), "training", restart=96) == whole[4:8]


def observations(pool, steps: int = 32) -> np.ndarray:
    """Each env's observations from a reset and `steps` steps forward: (B, steps + 1, 3)."""
    seen = [pool.reset()]
    for _ in range(steps):
        seen.append(pool.step(np.zeros(pool.num_envs, dtype=np.int64))[0])
    return np.stack(seen, axis=1)


def test_no_env_of_two_runs_a_restart_or_an_evaluation_replays_another(tmp_path):
    """With env i seeded seed + i, run 1's env i would replay run 0's env i + 1."""
    rows, names = [], []
    for seed in (0, 1):
        trainer = Trainer(resolve_config({
            "env": "corridor", "env_options": CORRIDOR, "core": "mlp", "core_options": {"hidden_size": 8}, "num_envs": 8,
            "rollout": 4, "seed": seed, "run_dir": str(tmp_path / str(seed)), "threads": 1,
        }))
        try:
            rows.append(observations(trainer.pool))
            names += [f"run {seed} env {i}" for i in range(8)]
            trainer.pool.seeds = trainer.training_seeds(restart=4096)  # as a resume without the envs does
            rows.append(observations(trainer.pool))
            names += [f"run {seed} env {i} restarted" for i in range(8)]
        finally:
            trainer.close()
    evaluation = LocalEnvs("corridor", evaluation_seeds(0, 8), CORRIDOR)
    rows.append(observations(evaluation))
    names += [f"evaluation 0 env {i}" for i in range(8)]
    evaluation.close()
    flat = np.concatenate(rows).reshape(len(names), -1)
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            assert not np.array_equal(flat[a], flat[b]), f"{names[a]} replays {names[b]}"


@pytest.mark.parametrize("seed, purpose, restart, named", [
    (-1, "training", 0, "seed -1"), (0, "training", -5, "restart -5"), (0, "testing", 0, "'testing'"),
])
def test_bad_arguments_name_the_value(seed, purpose, restart, named):
    with pytest.raises(ValueError, match=named):
        env_seeds(seed, range(4), purpose, restart)
