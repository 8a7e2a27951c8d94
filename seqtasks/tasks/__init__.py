"""The toy tasks by name, built from a run's config.

A task has `kind` "tokens" (a stream of token episodes, Episodes) or "sequences" (real-valued
sequences with one target each, Sequences), `generate(rng, count, split)`, and `finite` (True
where so few distinct episodes exist that splits cannot be disjoint). Token tasks also name
their `input_tokens` and `output_tokens`.
"""

from __future__ import annotations

from typing import Any, Callable

from seqtasks.tasks.algorithmic import AlgorithmicTask
from seqtasks.tasks.copy import CopyTask
from seqtasks.tasks.counting import CountingTask
from seqtasks.tasks.long_term import LongTermTask
from seqtasks.tasks.random_walk import RandomWalkTask

# name -> builder from a SeqConfig
TASKS: dict[str, Callable[[Any], Any]] = {
    "copy": lambda c: CopyTask(c.copy_length, c.copy_test_length, reverse=False),
    "reverse": lambda c: CopyTask(c.copy_length, c.copy_test_length, reverse=True),
    "counting": lambda c: CountingTask(c.max_count),
    "random_walk": lambda c: RandomWalkTask(c.grid_size, c.walk_length),
    "algorithmic": lambda c: AlgorithmicTask(c.n_vars, c.program_length),
    "adding": lambda c: LongTermTask("adding", c.seq_length, c.variable_length),
    "multiplication": lambda c: LongTermTask("multiplication", c.seq_length, c.variable_length),
    "xor": lambda c: LongTermTask("xor", c.seq_length, c.variable_length),
}
LONG_TERM = ("adding", "multiplication", "xor")


def make_task(name: str, config: Any):
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
    return TASKS[name](config)
