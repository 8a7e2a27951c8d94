"""The seqtasks update at Table 9's configuration, this tree against another checkout of this
repository, both in one process, alternating: did a change make the toy-task trainer slower?

    git worktree add --detach ../base e946a57
    python benchmarks/seqtasks_against.py ../base --core feedback --rounds 10
    FEEDBACK_RL_COMPILED=0 python benchmarks/seqtasks_against.py ../base   # this tree's Python step

Timing the two checkouts in separate processes one after another was too noisy to see a 10%
change on a shared 2-core machine: the same command gave 965 and 1,275 tokens/s a few minutes
apart. Here each checkout's trainer is built in the same process (its packages imported from
its own folder, the other's unloaded first: the two share nothing but torch), then the two take
`--rounds` rounds of two updates each, in alternating order, so a change in the machine's speed
falls on both alike; the medians are compared. The trainer is benchmarks/seqtasks.py's `build`
of each checkout (the real update: the next block of the stream, forward, loss, backward,
clipping, Adam), one thread.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from benchmarks.targets import interleaved  # noqa: E402

PACKAGES = ("agents", "seqtasks", "benchmarks", "envs", "experiments")  # a checkout's own packages


def import_from(tree: Path, module: str):
    """`module` as the checkout `tree` has it, with everything it imports of PACKAGES: whatever
    checkout's packages were imported before are unloaded first, so two checkouts' objects can
    live in one process (each keeps the modules it was built from)."""
    for name in [m for m in sys.modules if m.split(".")[0] in PACKAGES]:
        del sys.modules[name]
    sys.path.insert(0, str(tree))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(tree))


def build_step(tree: Path, core: str, folder: Path):
    """`tree`'s seqtasks trainer for `core` at Table 9's configuration (after its warm-up update):
    its step function."""
    return import_from(tree, "benchmarks.seqtasks").build(core, 32, "cpu", folder / tree.name).step


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", type=Path, help="another checkout of this repository (a git worktree)")
    parser.add_argument("--core", default="feedback")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if not (args.base / "benchmarks" / "seqtasks.py").is_file():
        parser.error(f"{args.base} is not a checkout of this repository (no benchmarks/seqtasks.py)")
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        steps = {"base": build_step(args.base.resolve(), args.core, Path(folder)), "this tree": build_step(HERE, args.core, Path(folder))}
        times: dict[str, list[float]] = {name: [] for name in steps}
        for name in interleaved(list(steps), args.rounds):
            start = time.perf_counter()
            steps[name]()
            steps[name]()
            times[name].append((time.perf_counter() - start) / 2)
    tokens = 64 * 32  # BPTT x batch, per update
    print(f"seqtasks {args.core}, Table 9 configuration, one thread, {args.rounds} alternating rounds of 2 updates")
    for name, taken in times.items():
        median = statistics.median(taken)
        print(f"  {name}: median {median:.3f} s per update ({tokens / median:,.0f} tokens/s); rounds {[round(t, 2) for t in taken]}")
    print(f"this tree / base, time per update: {statistics.median(times['this tree']) / statistics.median(times['base']):.3f}")


if __name__ == "__main__":
    main()
