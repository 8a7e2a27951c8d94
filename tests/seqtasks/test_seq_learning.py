"""A short CPU training run: the feedback core learns a small random walk (4x4 grid, walks of 8
actions) to at least 95% test accuracy. Bounded by updates, not seconds, so a busy machine slows
it but cannot fail it: about 0.11 s an update on one free core, so at most 1000 updates are under
two minutes, and it stops once validation reaches 97% (a few hundred updates)."""

import time

import pytest

from seqtasks.config import resolve_config
from seqtasks.train import Run

SMALL_WALK = dict(
    task="random_walk", core="feedback", grid_size=4, walk_length=8, n_train=1000, n_valid=100, n_test=200,
    d_model=32, n_layers=2, n_heads=2, span=16, dropout=0.0, batch_size=32, bptt=18, lr=3e-3, warmup=20,
    grad_clip=1.0, threads=1, seed=0,
)


@pytest.mark.slow
def test_feedback_learns_a_small_random_walk(tmp_path):
    config, _ = resolve_config({**SMALL_WALK, "run_dir": str(tmp_path)}, cuda=False)
    run = Run(config, {}, tmp_path)
    started, accuracy = time.monotonic(), 0.0
    while accuracy < 0.97 and run.update < 1000:
        for _ in range(50):
            run.step()
        accuracy = run.regime.evaluate(run.model, "valid")["accuracy"]
    test = run.regime.evaluate(run.model, "test")
    assert test["accuracy"] >= 0.95, f"test accuracy {test['accuracy']:.3f} after {run.update} updates, {time.monotonic() - started:.0f} s"
