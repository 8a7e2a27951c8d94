"""What a gradient window costs (--bptt K, agents/learners/window.py): seconds per A2C update at K = T, 4T
and 16T, for each core, at the CPU preset (B 64, T 32, the corridor), in one run.

Each (core, K) trainer is built once and warmed up until its window is full (K / T updates),
then the measurement rounds give every pair `--updates` updates in turn, every other round in
reverse order, so that a change in the machine's load hits all alike. Reported: seconds per
update, its ratio to the same core's K = T, and what each window step beyond the rollout adds,
(seconds at K - seconds at K = T) / (K - T): about the learning pass's forward and backward
per step of a K-step call, acting and the optimiser step subtracted (K > T adds the window's
advance, T steps without gradients, and at K = T the Feedback core learns from the acting
graph instead of running the rollout again). The expectation (docs/training.md)
is about K / T times the learning pass plus acting, which does not change; no target is checked.

    python benchmarks/bptt.py                          # lstm, feedback, transformer, ffm, lru; a few minutes on 2 cores
    python benchmarks/bptt.py --cores lstm --windows 1 2 8
    python benchmarks/bptt.py --cores ffm lru lstm feedback --windows 1 32   # K = 32 and 1,024
    python benchmarks/bptt.py --cores feedback lstm --packing both   # episodes packed or not (agents/learners/episode_packing.py)

--packing: the recompute with the window's episodes packed side by side (on, the default), each
env's column whole (off), or both as pairs of their own in the same rounds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from agents.config.a2c_config import resolve_config  # noqa: E402
from agents.learners.train import Trainer  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402
from benchmarks.targets import interleaved  # noqa: E402


def make_trainer(core: str, windows: int, packed: bool, run_dir: str) -> Trainer:
    """The CPU preset's trainer on the corridor with --bptt = `windows` rollouts."""
    config = resolve_config({"env": "corridor", "core": core, "preset": "cpu", "run_dir": run_dir, "threads": 1,
                             "env_options": {"length": 8, "max_episode_steps": 32}, "pack_episodes": packed})
    config.bptt = windows * config.rollout
    config.__post_init__()
    return Trainer(config)


def main(argv=None) -> dict[tuple[str, int, bool], float]:
    """Seconds per update of every (core, K / T, packed)."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", nargs="+", default=["lstm", "feedback", "transformer", "ffm", "lru"])
    parser.add_argument("--windows", nargs="+", type=int, default=[1, 4, 16], help="K / T values (default: 1 4 16)")
    parser.add_argument("--updates", type=int, default=3, help="timed updates per pair per round (default: 3)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--packing", choices=["on", "off", "both"], default="on", help="episodes packed side by side (default: on)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    packings = {"on": [True], "off": [False], "both": [True, False]}[args.packing]
    pairs = [(core, windows, packed) for core in args.cores for packed in packings for windows in args.windows]
    seconds = {pair: 0.0 for pair in pairs}
    with tempfile.TemporaryDirectory() as folder:
        trainers = {pair: make_trainer(*pair, f"{folder}/{pair[0]}-{pair[1]}-{pair[2]}") for pair in pairs}
        try:
            for (core, windows, _), trainer in trainers.items():
                for _ in range(windows):  # the window full
                    trainer.update()
            for pair in interleaved(pairs, args.rounds):
                started = time.perf_counter()
                for _ in range(args.updates):
                    trainers[pair].update()
                seconds[pair] += time.perf_counter() - started
        finally:
            for trainer in trainers.values():
                trainer.close()
    print(f"{cpu_model()}, 1 torch thread; {load_line()}")
    print("| core | episodes | K / T | K | seconds per update | against K = T | ms per window step beyond T |\n|---|---|---|---|---|---|---|")
    per_update = {pair: total / (args.rounds * args.updates) for pair, total in seconds.items()}
    for core, windows, packed in pairs:
        now, base = per_update[core, windows, packed], per_update[core, args.windows[0], packed]
        extra = (windows - args.windows[0]) * 32
        beyond = f"{(now - base) / extra * 1e3:.3f}" if extra else "–"
        print(f"| {core} | {'packed' if packed else 'whole'} | {windows} | {windows * 32} | {now:.3f} | {now / base:.2f}x | {beyond} |")
    return per_update


if __name__ == "__main__":
    main()
