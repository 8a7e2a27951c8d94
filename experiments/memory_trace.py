"""A corridor training run that records, as it trains, what its agent's memory path does.

    python -m experiments.memory_trace a2c TRAIN_ARGS...    # train_a2c.py's arguments (ppo: train_ppo.py's)

The run is the trainer's own (same flags, weights, logs, checkpoints, resumption: probing draws
no random numbers and changes nothing the run learns, tests/experiments/test_memory_trace.py).
Before the first update, every 10,000 frames up to 100,000 and every 50,000 after, the policy is
probed on corridors walked straight to the doors (experiments/memory_probes.py: the cue's
separation at the doors and along the walk, the gradient reaching the cue's step, and for the
Feedback core softmax(w), the memory's cue part step by step and its retention, the weights'
norms), with the training episodes' success since the last probe. The probes travel in the
checkpoint and are written, after each and on resuming, to RUN_DIR/trace.json (whole or not at
all: durable/records.py; a resumed run rewrites it from its checkpoint, so a cut-off one is made
whole and one ahead of the checkpoint is taken back to it):

    {"config": {...}, "probes": [{"frames": 0, "train_success": null, "cue_separation": ..., ...}, ...]}

Used by feedback_forgetting.py for every run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from agents import command_line
from durable.interrupt import ignore_stop_signals
from agents.learners.ppo import PPOTrainer
from durable.records import write_json
from agents.learners.train import Trainer
from experiments.cue_memory import walk_to_doors
from experiments.memory_probes import probe

TRAINERS = {"a2c": Trainer, "ppo": PPOTrainer}
EARLY, EARLY_UNTIL, LATER = 10_000, 100_000, 50_000  # probe every EARLY frames up to EARLY_UNTIL, then every LATER


def next_probe(frames: int) -> int:
    """The first frame count after `frames` at which to probe."""
    every = EARLY if frames < EARLY_UNTIL else LATER
    return (frames // every + 1) * every


def traced(base: type[Trainer]) -> type[Trainer]:
    """`base` with probes of its policy's memory path, kept in the checkpoint and trace.json."""

    class Traced(base):
        def __init__(self, config):
            if config.env != "corridor":
                raise ValueError(f"the memory trace walks corridors; --env is {config.env!r}, use --env corridor")
            super().__init__(config)
            self.walk = walk_to_doors(config.env_options)
            self.probes: list[dict[str, Any]] = []
            self.successes: list[float] = []  # training episodes' success since the last probe

        def update(self):
            if not self.probes:
                self.record()
            stats, episodes = super().update()
            self.successes += episodes.values.get("success", [])
            if self.global_step >= next_probe(self.probes[-1]["frames"]) or self.global_step >= self.config.total_steps:
                self.record()
            return stats, episodes

        def record(self) -> None:
            success = float(np.mean(self.successes)) if self.successes else None
            self.probes.append({"frames": self.global_step, "train_success": success, **probe(self.policy, self.walk)})
            self.successes = []
            self.write_trace()

        def write_trace(self) -> None:
            write_json(Path(self.config.run_dir) / "trace.json", {"config": self.config.to_dict(), "probes": self.probes})

        def state_dict(self, with_envs: bool = True):
            payload = super().state_dict(with_envs)
            if payload is not None:
                payload["trace"] = {"probes": self.probes, "successes": self.successes}
            return payload

        def load_state_dict(self, payload):
            super().load_state_dict(payload)
            trace = payload.get("trace", {"probes": [], "successes": []})
            self.probes, self.successes = list(trace["probes"]), list(trace["successes"])
            self.write_trace()

    Traced.__name__ = Traced.__qualname__ = f"Traced{base.__name__}"
    return Traced


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in TRAINERS:
        sys.exit(f"usage: python -m experiments.memory_trace {{{','.join(TRAINERS)}}} TRAIN_ARGS...; got {argv[:1] or 'nothing'}")
    command_line.main(traced(TRAINERS[argv[0]]), __doc__, argv[1:])


if __name__ == "__main__":
    main()
    ignore_stop_signals()
