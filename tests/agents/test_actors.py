"""The env pools: envs stepped in the learner (LocalEnvs) and sharded over worker processes
(ActorPool) give the same trajectories for the same seed and actions."""

import numpy as np

from agents.runtime.actors import ActorPool, LocalEnvs

NUM_ENVS = 5


def trajectory(pool, steps: int = 4) -> list[np.ndarray]:
    """Observations from a reset and `steps` steps of fixed actions."""
    observations = [pool.reset()]
    for t in range(steps):
        observations.append(pool.step((np.arange(NUM_ENVS) + t) % pool.num_actions)[0])
    return observations


def test_actor_pool_resets_from_its_current_seeds():
    """A resume that cannot restore the envs sets pool.seeds and resets: the workers must start
    the episodes of those seeds (env i from seeds[i], as LocalEnvs does), not replay the ones of
    the seeds they were built with."""
    built, now = [0, 1, 2, 3, 4], [123, 7, 55, 9, 1000]
    pool = ActorPool("maze", built, num_actors=2)
    try:
        pool.seeds = now
        pooled = trajectory(pool)
    finally:
        pool.close()
    for seeds, same in ((now, True), (built, False)):
        local = LocalEnvs("maze", seeds)
        expected = trajectory(local)
        local.close()
        assert all(np.array_equal(a, b) for a, b in zip(pooled, expected)) == same, f"seeds {seeds}"
