"""Seeding: every env's stream (`env_seeds`), and the global generators a run draws from,
captured for exact resume.

Env streams. Env i of run `seed` used to be seeded `seed + i` (Gymnasium's convention for a
vector env given an int), so run s + 1's env i replayed run s's env i + 1: seeds 0-9 with 64
envs drew from 73 streams, not 640, and their runs were not independent. `env_seeds` instead
keys each env's stream by (seed, purpose, restart frame, env index) through numpy's
`SeedSequence` (`spawn_key`), so streams never line up across seeds, envs or restarts. Keyed by
the env's index in the whole batch, a torchrun rank or an actor worker derives its own share of
the envs exactly as one process derives them all.

The result is one int per env, what every Gymnasium env's `reset(seed=)` takes, at most 32 bits
wide: some envs seed numpy's legacy global generator with it (POPGym's mazes), which stops at
2**32 - 1. The top bit is the purpose (0 training, 1 evaluation), so evaluation streams are
never a training run's, by construction; the other 31 bits are hashed from the key, so two
training streams share a seed only by chance: about 1e-4 for the 640 envs of 10 runs of 64.
"""

from __future__ import annotations

import random
from typing import Any, Literal

import numpy as np
import torch

PURPOSES = ("training", "evaluation")  # index = the seed's top bit
SEED_BITS = 32  # numpy's legacy seeding (np.random.seed), used by some Gymnasium envs, takes no more


def env_seeds(seed: int, envs: range, purpose: Literal["training", "evaluation"], restart: int = 0) -> list[int]:
    """The reset seeds of envs `envs` (indices into the run's whole batch) of run `seed`.

    purpose: "training" for a run's env pool, "evaluation" for evaluate.py and the probes (never
    a training stream). restart: the frame a training pool starts its episodes at, 0 for a new
    run; a resume that cannot restore the envs starts fresh ones at its global step rather than
    replay the first.
    """
    if seed < 0 or restart < 0:
        raise ValueError(f"seed and restart must be >= 0, got seed {seed} and restart {restart}")
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}; choose from {list(PURPOSES)}")
    top = PURPOSES.index(purpose)
    half = 2 ** (SEED_BITS - 1)
    return [top * half + int(np.random.SeedSequence(seed, spawn_key=(top, restart, i)).generate_state(1)[0]) % half for i in envs]


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators (all CUDA devices included)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_states() -> dict[str, Any]:
    """The states of the global generators, to store in a checkpoint: tensors, numbers, strings
    and containers of them only (agents/runtime/checkpoint.py), so numpy's key is a list of ints."""
    numpy_state = np.random.get_state(legacy=False)
    numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
    states = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    """Restore what rng_states() returned."""
    random.setstate(states["python"])
    numpy_state = dict(states["numpy"])
    numpy_state["state"] = {**numpy_state["state"], "key": np.asarray(numpy_state["state"]["key"], dtype=np.uint32)}
    np.random.set_state(numpy_state)
    torch.set_rng_state(states["torch"].cpu())
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in states["cuda"]])
