"""The env pools: envs stepped in the learner (LocalEnvs) and sharded over worker processes
(ActorPool) give the same trajectories for the same seed and actions."""

import numpy as np

from agents.actors import ActorPool, LocalEnvs

NUM_ENVS = 5


def trajectory(pool, steps: int = 4) -> list[np.ndarray]:
    """Observations from a reset and `steps` steps of fixed actions."""
    observations = [pool.reset()]
    for t in range(steps):
        observations.append(pool.step((np.arange(NUM_ENVS) + t) % pool.num_actions)[0])
    return observations


def test_actor_pool_resets_from_its_current_seed():
    """A resume that cannot restore the envs sets pool.seed and resets: the workers must start
    the episodes of that seed (env i from seed + i, as LocalEnvs does), not replay the ones of
    the seed they were built with."""
    pool = ActorPool("maze", NUM_ENVS, seed=0, num_actors=2)
    try:
        pool.seed = 123
        pooled = trajectory(pool)
    finally:
        pool.close()
    for seed, same in ((123, True), (0, False)):
        local = LocalEnvs("maze", NUM_ENVS, seed)
        expected = trajectory(local)
        local.close()
        assert all(np.array_equal(a, b) for a, b in zip(pooled, expected)) == same, f"seed {seed}"
