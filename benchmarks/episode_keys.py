"""What skipping attention weights of exactly 0, scoring positions by shifting and a top layer
that attends from the rollout's steps only save a Transformer over the episode
(agents/cores/transformer.py): one episode's A2C work at span L + 1, five ways, in one run.

A Transformer whose span covers the episode carries L + 1 slots. Following the episode (--bptt
episode), every learning call starts from an empty memory (agents/learners/window.py), so none of
its carried slots is in a query's episode; acting, step t of an episode sees t + 1 of them. And in
a call of T steps, query t sees none of the T - t - 1 keys after its own. Each query's position
scores need only the distances of its keys, not all L + 2 of the span. And a learning call's loss
is on its rollout's steps only, so the top layer's outputs at the steps before are nobody's. The
five ways:
- "all S + T, one matrix": every call attends over all its keys in one (T, S + T) matrix (before
  2026-12-05), its position scores q against every distance's embedding, then gathered;
- "the seen, one matrix": over the keys from the least episode start on (first_seen_key);
- "the seen, by query chunks": and a long call's queries in chunks of QUERY_CHUNK, each over the
  keys up to its last query (2026-12-05 morning);
- "and positions shifted": and the position scores of each call or chunk against its keys'
  distances only, shifted into place (attention.shifted_position_scores; 2026-12-05 afternoon);
- "and the top layer from the rollout": and the call asked for the rollout's outputs only
  (TransformerCore.forward's outputs_from, as the learners ask; the default).
One episode's work at the A2C CPU preset (B 64 envs; d_model 64, 2 layers, 4 heads; rollouts of
T = 32 steps): the learning calls with their backward, of 32, 64, ... steps up to the episode's
length from an empty memory (each rollout's steps and the episode's steps before them), the loss
on the rollout's steps, then the L + 1 acting steps without gradients. Interleaved rounds (benchmarks/targets.py); the median round.

    python benchmarks/episode_keys.py                  # L = 256; about three minutes
    python benchmarks/episode_keys.py --length 512 --rounds 3

Targets, at L = 256: the episode's work 2x as fast as all S + T in one matrix; positions shifted
1.2x as fast as gathered, the keys read alike; and the top layer from the rollout 1.3x as fast as
from every step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.cores import attention, make_core, transformer  # noqa: E402
from agents.runtime.freed_memory import keep_freed_memory  # noqa: E402
from benchmarks.naive_cores import gathered_position_scores  # noqa: E402
from benchmarks.targets import interleaved, ratio_target, report  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402

BATCH, INPUT_DIM, ROLLOUT = 64, 16, 32
TARGET, SHIFTED_TARGET, ROLLOUT_TARGET = 2.0, 1.2, 1.3
WAYS = {  # keys from the least episode start only, queries in chunks, position scores shifted, outputs asked from the rollout
    "all S + T, one matrix": (False, False, False, False),
    "the seen, one matrix": (True, False, False, False),
    "the seen, by query chunks": (True, True, False, False),
    "and positions shifted": (True, True, True, False),
    "and the top layer from the rollout": (True, True, True, True),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--length", type=int, default=256, help="L: episodes of L + 1 steps, span L + 1 (default: 256)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="exit 1 if the target is missed")
    args = parser.parse_args(argv)
    if args.length < 1:
        parser.error(f"--length must be >= 1, got {args.length}")
    torch.set_num_threads(1)
    kept = keep_freed_memory()
    torch.manual_seed(0)
    steps = args.length + 1
    core = make_core("transformer", INPUT_DIM, d_model=64, n_layers=2, n_heads=4, span=steps)
    x = torch.randn(steps, BATCH, INPUT_DIM)
    first = torch.zeros(steps, BATCH, dtype=torch.bool)
    first[0] = True
    calls = list(range(ROLLOUT, steps, ROLLOUT)) + [steps]

    def learning(asked: bool) -> float:
        began = time.perf_counter()
        for rollout_from, length in zip([0, *calls], calls):
            if asked:
                y, _ = core(x[:length], core.initial_state(BATCH, "cpu"), first[:length], rollout_from)
            else:
                y, _ = core(x[:length], core.initial_state(BATCH, "cpu"), first[:length])
                y = y[rollout_from:]
            y.square().mean().backward()
        return time.perf_counter() - began

    def acting() -> float:
        began, state = time.perf_counter(), core.initial_state(BATCH, "cpu")
        with torch.no_grad():
            for t in range(steps):
                _, state = core(x[t : t + 1], state, first[t : t + 1])
        return time.perf_counter() - began

    def episode(way: str) -> tuple[float, float]:
        """(learning, acting) seconds of one episode's work, the keys read as `way` says."""
        skip_unseen, by_chunks, shifted, asked = WAYS[way]
        saved = transformer.first_seen_key, transformer.QUERY_CHUNK, attention.shifted_position_scores
        if not skip_unseen:
            transformer.first_seen_key = lambda starts: 0
        if not by_chunks:
            transformer.QUERY_CHUNK = steps
        if not shifted:
            attention.shifted_position_scores = gathered_position_scores
        try:
            return learning(asked), acting()
        finally:
            transformer.first_seen_key, transformer.QUERY_CHUNK, attention.shifted_position_scores = saved

    times: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for way in interleaved(list(WAYS), args.rounds):
        times[way].append(episode(way))
    print(f"{cpu_model()}, torch {torch.__version__}, 1 thread, B {BATCH}, L = {args.length:,}, "
          f"freed memory kept: {kept}; {load_line()}")
    print("| keys read | learning calls (s) | acting steps (s) | episode (s) | against all in one matrix | rounds (s) |\n|---|---|---|---|---|---|")
    median = {way: statistics.median(sum(t) for t in times[way]) for way in WAYS}
    first = next(iter(WAYS))
    for way in WAYS:
        learn = statistics.median(t[0] for t in times[way])
        act = statistics.median(t[1] for t in times[way])
        rounds = ", ".join(f"{sum(t):.2f}" for t in times[way])
        print(f"| {way} | {learn:.2f} | {act:.2f} | {median[way]:.2f} | {median[first] / median[way]:.2f}x | {rounds} |")
    default = median["and the top layer from the rollout"]
    verdicts = [
        ratio_target(f"episode's work at L = {args.length:,}, all keys in one matrix / the default", median[first], default, TARGET, ""),
        ratio_target(f"episode's work at L = {args.length:,}, positions gathered / shifted", median["the seen, by query chunks"],
                     median["and positions shifted"], SHIFTED_TARGET, ""),
        ratio_target(f"episode's work at L = {args.length:,}, the top layer from every step / from the rollout",
                     median["and positions shifted"], default, ROLLOUT_TARGET, ""),
    ]
    return report(verdicts, args.check)


if __name__ == "__main__":
    sys.exit(main())
