"""Which weights' training grew a Feedback corridor agent's memory, and what that did to the cue.

    python -m experiments.memory_growth RUN_DIR [RUN_DIR ...]

For a trained Feedback run on the corridor, against a fresh policy of its config and seed: the
memory size |m| (mean over the walk) and the cue's retention per step (experiments/memory_probes.py)
of the fresh policy, of the trained one, of the fresh one with only one group of weights trained
(embedding, each layer's attention output, feed-forward and norms, the key/value projection, the
memory's norm, w), and of the trained one with only that group fresh. The last column is
retention x |m|: constant when the memory's size alone sets how much of the cue survives a step
(a read through the LayerNorm divides the cue's part by the memory's spread).
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from agents.model.policy import Policy
from experiments.cue_memory import CueWalk, trained_and_fresh, walk_to_doors
from experiments.frame.analyse import UnfitRun, analyse_runs
from experiments.frame.tables import markdown_table, table_row
from experiments.memory_probes import probe


def size_and_retention(policy: Policy, walk: CueWalk) -> tuple[float, float]:
    numbers = probe(policy, walk)
    return float(np.mean(numbers["memory_norm"][1:])), numbers["retention"]


def with_weights(policy: Policy, source: Policy, prefix: str) -> Policy:
    """A copy of `policy` whose parameters named `prefix...` are `source`'s."""
    mixed = copy.deepcopy(policy)
    sources = dict(source.named_parameters())
    with torch.no_grad():
        for name, parameter in mixed.named_parameters():
            if name.startswith(prefix):
                parameter.copy_(sources[name])
    return mixed


def groups(policy: Policy) -> dict[str, str]:
    """Weight group -> parameter name prefix, for the Feedback core's groups."""
    names = {"embedding": "core.embed.", "key/value projection": "core.kv.", "memory norm": "core.memory_norm.", "w": "core.layer_logits"}
    for layer in range(len(policy.core.blocks)):
        for part, what in (("out", "attention output"), ("ff", "feed-forward"), ("norm", "norms")):
            names[f"layer {layer + 1} {what}"] = f"core.blocks.{layer}.{part}"
    return names


def report(run_dir: str) -> None:
    """The run's table: a row per policy, fresh or trained with one weight group swapped."""
    run, fresh = trained_and_fresh(run_dir, ("corridor",))
    if run.config.core != "feedback":
        raise UnfitRun(f"{run_dir} is a {run.config.core} run on {run.config.env!r}; this needs a feedback run on the corridor")
    walk = walk_to_doors(run.config.env_options)
    print(f"{run_dir} (step {run.global_step:,})\n")
    print(markdown_table(["weights", "memory size", "retention", "retention x size"], []), end="")  # its rows as they are measured
    rows = {"fresh": fresh, "trained": run.policy}
    for group, prefix in groups(fresh).items():
        rows[f"fresh, {group} trained"] = with_weights(fresh, run.policy, prefix)
        rows[f"trained, {group} fresh"] = with_weights(run.policy, fresh, prefix)
    for name, policy in rows.items():
        size, retention = size_and_retention(policy, walk)
        print(table_row([name, f"{size:.2f}", f"{retention:.3f}", f"{size * retention:.2f}"]))
    print()


def main(argv: list[str] | None = None) -> None:
    analyse_runs(__doc__, "Feedback corridor run folders (or checkpoint files)", report, argv)


if __name__ == "__main__":
    main()
