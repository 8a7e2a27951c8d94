"""The compiled Feedback core's learning pass at the CPU preset, this tree against another checkout
of this repository, in one process: did a change to the step (its C++ loops above all) make it
faster?

    git worktree add --detach ../base HEAD
    python benchmarks/feedback_against.py ../base --rounds 8

A change to the attention's loops moves a few percent of the pass, less than the pass varies
between processes minutes apart, so both checkouts' cores are built in this process (each one's
packages imported from its own folder, as benchmarks/seqtasks_against.py does) and timed in
alternating rounds. Each checkout's core is built twice, in the order base, this, this, base:
on the 2-core AMD EPYC the core built first read its backward loops 14-17% faster than the
one built second, the same code, so where a core's memory lies must fall on both sides alike.

Each round times every core's learning pass (benchmarks/feedback_compiled.py's: a call of
T = 32 steps with gradients from a full window, then the backward of a loss over it) per step,
then profiles 3 more calls for the self time of the attention's C++ loops (its `feedback::`
records, a step: `feedback::attend` and `feedback::attend_backward` today, and all of them
together as `feedback::*`). Printed: each side's medians over its rounds and
both cores, and this tree / base for each; a loop one side lacks reads 0 there.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from benchmarks.feedback_compiled import loop_seconds  # noqa: E402  (this tree's: it only reads a profile)
from benchmarks.seqtasks_against import import_from  # noqa: E402
from benchmarks.targets import interleaved, per_call  # noqa: E402

PROFILED_CALLS = 3


def pass_builder(tree: Path):
    """(build, steps) of `tree`: build() makes a compiled Feedback core of `tree` at the CPU
    preset with a full window and returns its learning call, of `steps` steps. Imports `tree`'s
    packages (seqtasks_against.import_from) and builds its compiled step if needed."""
    bench = import_from(tree, "benchmarks.feedback_compiled")
    if bench.feedback_compiled.extension() is None:
        raise SystemExit(f"{tree}: its compiled Feedback step is not available here (see the line above)")

    def build():
        torch.manual_seed(0)
        core = bench.make_core("feedback", bench.INPUT_DIM, **bench.FEEDBACK, step="compiled")
        x, first = torch.randn(bench.LEARN_STEPS, bench.BATCH, bench.INPUT_DIM), torch.zeros(bench.LEARN_STEPS, bench.BATCH, dtype=torch.bool)
        state = bench.full_state(core, bench.BATCH)
        return lambda: bench.learning_call(core, x, state, first)

    return build, bench.LEARN_STEPS


def loops_per_step(learn, steps: int) -> dict[str, float]:
    """Seconds a step of each of the step's C++ loops (its `feedback::` records: a side may have
    loops the other lacks), torch.profiler's self time over PROFILED_CALLS calls, and of all of
    them together ("feedback::*")."""
    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        for _ in range(PROFILED_CALLS):
            learn()
    found = loop_seconds(profiled, PROFILED_CALLS, steps)
    return {**found, "feedback::*": sum(found.values())}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", type=Path, help="another checkout of this repository (a git worktree)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=0.5, help="timing of each core's learning pass a round")
    args = parser.parse_args(argv)
    if not (args.base / "benchmarks" / "feedback_compiled.py").is_file():
        parser.error(f"{args.base} is not a checkout of this repository (no benchmarks/feedback_compiled.py)")
    if args.rounds < 1 or args.seconds <= 0:
        parser.error(f"--rounds must be >= 1 and --seconds > 0, got {args.rounds} and {args.seconds}")
    torch.set_num_threads(1)
    builders = {"base": pass_builder(args.base.resolve()), "this tree": pass_builder(HERE)}
    cores = [(side, builders[side][0]()) for side in ("base", "this tree", "this tree", "base")]  # built in this order
    times: dict[str, dict[str, list[float]]] = {side: collections.defaultdict(list) for side in builders}
    for side, learn in interleaved(cores, args.rounds):
        steps = builders[side][1]
        times[side]["pass"].append(per_call(learn, args.seconds) / steps)
        for name, seconds in loops_per_step(learn, steps).items():
            times[side][name].append(seconds)
    rows = ["pass", *sorted({name for parts in times.values() for name in parts} - {"pass", "feedback::*"}), "feedback::*"]
    medians = {side: {what: statistics.median(parts[what]) if parts[what] else 0.0 for what in rows} for side, parts in times.items()}
    print(f"the compiled Feedback core's learning pass, CPU preset, one thread, {args.rounds} alternating rounds, "
          f"each side's core built twice (base, this, this, base); medians, ms a step:")
    print(f"  {'':28s} {'base':>10s} {'this tree':>10s} {'this / base':>12s}")
    for what in rows:
        base, ours = medians["base"][what], medians["this tree"][what]
        print(f"  {what:28s} {1e3 * base:10.3f} {1e3 * ours:10.3f} {ours / base if base else float('nan'):12.3f}")
    return medians


if __name__ == "__main__":
    main()
