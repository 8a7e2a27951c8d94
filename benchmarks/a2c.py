"""End-to-end A2C training frames per second of every core on the maze, side by side.

Two settings (`--sizes`). paper (the default): one fixed config for all, the maze, B = 64 envs,
rollouts of T = 100 steps (the paper's BPTT), Adam; cores at the paper's maze sizes (feedback,
transformer, reservoir: 2 layers, d_model 256, 4 heads, span 200) except the LSTM at 1 layer x 256
(the size the target names) and the MLP at 2 x 256. cpu: the trainer's CPU preset as
`train_a2c.py --env maze --core CORE --preset cpu` runs it (B = 64, T = 32; feedback and
transformer 2 layers, d_model 64, 4 heads, span 64; LSTM 1 x 128). Beside them, the peer for the LSTM: sb3-contrib's RecurrentPPO set up to do the same
work per update (benchmarks/recurrent_ppo.py: the same envs and rollout, one LSTM of 1 x 256, one
epoch over the rollout as a single minibatch). The measurements are interleaved: `--rounds`
rounds, each giving every (core, actor workers) pair and the peer a slice of `--seconds` /
`--rounds`, every other round in reverse order, so that a change in load hits all alike. A slice
is a subprocess of its own: it builds the trainer (agents/learners/train.py), takes one untimed update
(warm-up, and memory filling up), then updates until the slice has passed (at least two).
Frames/s = frames / seconds summed over the rounds, split between acting (collecting the
rollout, envs included) and learning (the forward and backward pass over the chunk and the
optimiser step). All run on the same `--threads` torch threads. Beside each, the bytes moved
between host and learner device per frame (a count, not a timing: agents/runtime/staging.py's copies to
the device and the actions read back), which on a GPU is what crosses the bus.

It also answers "should the learner keep the acting graph instead of recomputing the chunk?",
per core, in seconds per update (in-process): the feedback and LSTM cores can be fed a step at
a time within one call, so both learners run for real (`learner` acting_graph and recompute).
The other cores' calls hand back a detached state, so for them keeping the graph is estimated: one
rollout acting with gradients on (each T = 1 call's graph kept) and one backward pass through
all of them, a lower bound on what a graph-keeping learner would pay (it lacks the gradient
paths through the memory), against the trainer's no-grad acting plus recompute.

The targets are ratios within this run, all in-process (no actor workers): at paper sizes
feedback >= 0.7 x transformer frames/s and our LSTM A2C >= 1.0 x RecurrentPPO frames/s; at cpu
sizes feedback >= 0.6 x LSTM frames/s (issue 21; 0.8 is the aim). Without sb3-contrib (the
`bench` extra) the peer is not run and its target is skipped. `--check` exits 1 unless the
measured targets pass.

    python benchmarks/a2c.py                       # everything, several minutes on 2 cores
    python benchmarks/a2c.py --cores feedback transformer lstm --actors 0 --no-learner-comparison --check
    python benchmarks/a2c.py --sizes cpu --cores feedback lstm --actors 0 --no-learner-comparison --threads 1 --check
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from agents.cores import CORES as CORE_CLASSES  # noqa: E402
from durable.records import write_text  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402
from benchmarks.targets import Verdict, interleaved, ratio_target, report  # noqa: E402

ATTENTION = {"d_model": 256, "n_layers": 2, "n_heads": 4, "span": 200}
CORES = {
    "feedback": ("feedback", ATTENTION),
    "transformer": ("transformer", ATTENTION),
    "lstm": ("lstm", {"hidden_size": 256, "n_layers": 1}),
    "reservoir": ("reservoir", {**ATTENTION, "kind": "ffn", "n_reservoir": 1}),
    "mlp": ("mlp", {"hidden_size": 256, "n_layers": 2}),
}
NUM_ENVS, ROLLOUT = 64, 100
PEER = "recurrent-ppo"  # sb3-contrib's RecurrentPPO with an LSTM sized as CORES["lstm"]
TARGETS = {"feedback / transformer": 0.7, f"lstm / {PEER}": 1.0, "feedback / lstm": 0.6}  # frames/s in-process, this run


GRAPHED = "+graph"  # a measurement "CORE+graph": the core acting through a CUDA graph (--graphed), the recompute learner


def make_trainer(core: str, actors: int, device: str, threads: int, learner: str = "auto", sizes: str = "paper"):
    """The trainer of one measurement; learner "graphed": recompute, acting through a CUDA graph (--cuda-graph)."""
    from agents.config.a2c_config import resolve_config
    from agents.learners.train import Trainer

    name, options = CORES[core]
    graphed = learner == "graphed"
    given = dict(env="maze", core=name, preset="cpu", num_actors=actors, device=device, threads=threads,
                 learner="recompute" if graphed else learner, cuda_graph=graphed, run_dir="/tmp/unused-benchmark-run")
    if sizes == "paper":
        given.update(num_envs=NUM_ENVS, rollout=ROLLOUT, optimizer="adam", core_options=options)
    return Trainer(resolve_config(given))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(core: str, actors: int, device: str, threads: int, seconds: float, learner: str, sizes: str) -> dict:
    """Frames and seconds of training timed, of them the seconds acting, and seconds per update;
    with learner "estimate", also the seconds of an update keeping the graph (a lower bound)."""
    trainer = make_trainer(core, actors, device, threads, "recompute" if learner == "estimate" else learner, sizes)
    rollout_steps, envs = trainer.config.rollout, trainer.config.num_envs
    try:
        trainer.update()  # warm-up: memory fills, allocator settles
        moved_before = trainer.actor.staging.bytes_to_device + trainer.actor.bytes_to_host
        acting = learning = 0.0
        updates = 0
        while updates < 2 or acting + learning < seconds:
            started = time.perf_counter()
            trainer.policy.train(trainer.keep_graph)
            rollout, _ = trainer.actor.collect(rollout_steps, trainer.keep_graph)
            sync(trainer.device)
            collected = time.perf_counter()
            trainer.policy.train()
            trainer.learn(rollout)
            sync(trainer.device)
            acting += collected - started
            learning += time.perf_counter() - collected
            updates += 1
        result = {"frames": updates * envs * rollout_steps, "seconds": acting + learning, "acting_s": acting,
                  "update_s": (acting + learning) / updates, "threads": torch.get_num_threads(),
                  "bytes_moved": trainer.actor.staging.bytes_to_device + trainer.actor.bytes_to_host - moved_before}
        if learner == "estimate":
            result["graph_update_s"] = acting_graph_update(trainer)
        return result
    finally:
        trainer.close()


def acting_graph_update(trainer) -> float:
    """Seconds for one rollout acted with gradients kept, then one backward pass through it."""
    actor, policy = trainer.actor, trainer.policy
    policy.train()
    started = time.perf_counter()
    total = 0.0
    for _ in range(trainer.config.rollout):
        inputs, _ = actor.staged()
        logits, value, actor.state = policy(inputs, actor.state)
        actor._act(logits[0].detach(), greedy=False)  # sample, step the envs, move on
        total = total + logits.logsumexp(-1).mean() + value.mean()  # stands in for the A2C loss
    trainer.optimizer.zero_grad(set_to_none=True)
    total.backward()
    trainer.optimizer.step()
    sync(trainer.device)
    return time.perf_counter() - started


def measure_peer(device: str, threads: int, seconds: float) -> dict:
    """measure() for RecurrentPPO (needs sb3-contrib, so imported only here)."""
    from agents.runtime.device import resolve_device
    from benchmarks.recurrent_ppo import measure as measure_recurrent_ppo

    if threads:
        torch.set_num_threads(threads)
    hidden_size = CORES["lstm"][1]["hidden_size"]
    return measure_recurrent_ppo(NUM_ENVS, ROLLOUT, hidden_size, resolve_device(device), seconds)


def run_worker(core: str, actors: int, learner: str, seconds: float, args) -> dict:
    command = [sys.executable, __file__, "--worker", core, str(actors), learner, "--device", args.device,
               "--threads", str(args.threads), "--seconds", str(seconds), "--sizes", args.sizes]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def combine(slices: list[dict]) -> dict:
    """One measurement's slices from all rounds: frames/s and acting share over their sum, and
    the bytes moved per frame where the slices counted them (the peer's do not)."""
    errors = [r["error"] for r in slices if "error" in r]
    if errors:
        return {"error": errors[0]}
    seconds, frames = sum(r["seconds"] for r in slices), sum(r["frames"] for r in slices)
    combined = {"fps": frames / seconds, "acting_share": sum(r["acting_s"] for r in slices) / seconds,
                "threads": sorted({r["threads"] for r in slices})}
    if all("bytes_moved" in r for r in slices):
        combined["bytes_per_frame"] = sum(r["bytes_moved"] for r in slices) / frames
    return combined


def bytes_moved(result: dict) -> str:
    """"; N B" for a table cell, where the measurement counted the bytes moved per frame."""
    return f"; {result['bytes_per_frame']:,.0f} B" if "bytes_per_frame" in result else ""


def targets(fps: dict[str, float | None], peer_missing: str, sizes: str) -> list[Verdict]:
    """The verdicts on this run's in-process frames/s per core (and PEER); `peer_missing` says
    why the peer was not run, if it was not."""
    if sizes == "cpu":
        return [ratio_target("feedback / lstm frames/s (cpu preset)", fps.get("feedback"), fps.get("lstm"),
                             TARGETS["feedback / lstm"], "needs --cores feedback lstm and --actors 0")]
    return [
        ratio_target("feedback / transformer frames/s", fps.get("feedback"), fps.get("transformer"),
                     TARGETS["feedback / transformer"], "needs --cores feedback transformer and --actors 0"),
        ratio_target(f"lstm A2C / {PEER} frames/s", fps.get("lstm"), fps.get(PEER),
                     TARGETS[f"lstm / {PEER}"], peer_missing or "needs --cores lstm and --actors 0"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", nargs="+", default=list(CORES), choices=list(CORES))
    parser.add_argument("--sizes", choices=["paper", "cpu"], default="paper", help="paper: the paper's core sizes, T = 100; cpu: the CPU preset")
    parser.add_argument("--actors", nargs="+", type=int, default=[0, 2], help="actor worker counts to compare (0: envs in the learner)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="learner torch threads (0: torch's default)")
    parser.add_argument("--seconds", type=float, default=10.0, help="timed training per measurement, over all rounds")
    parser.add_argument("--rounds", type=int, default=2, help="timed slices per measurement, interleaved with the others'")
    parser.add_argument("--graphed", nargs="+", default=[], choices=["feedback", "lstm", "mlp"],
                        help="also measure these cores acting through a CUDA graph (--cuda-graph, the recompute learner; in-process only), rows CORE+graph")
    parser.add_argument("--no-learner-comparison", action="store_true", help="skip the kept-graph against recompute columns")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the targets pass")
    parser.add_argument("--worker", nargs=3, metavar=("CORE", "ACTORS", "LEARNER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        core, actors, learner = args.worker[0], int(args.worker[1]), args.worker[2]
        if core == PEER:
            print(json.dumps(measure_peer(args.device, args.threads, args.seconds)))
        else:
            print(json.dumps(measure(core, actors, args.device, args.threads, args.seconds, learner, args.sizes)))
        return 0
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")

    setting = f"B={NUM_ENVS}, T={ROLLOUT}, paper core sizes" if args.sizes == "paper" else "the CPU preset (B=64, T=32)"
    print(f"# A2C training frames/s, maze, {setting}; {cpu_model()}, torch {torch.__version__}, "
          f"{args.threads or torch.get_num_threads()} threads, device {args.device}, {args.rounds} interleaved rounds; {load_line()}")
    measurements = [(core, actors) for core in args.cores for actors in args.actors]
    measurements += [(core + GRAPHED, 0) for core in args.graphed]
    peer_missing = ""
    if importlib.util.find_spec("sb3_contrib") is None:
        peer_missing = 'sb3-contrib is not installed (pip install -e ".[bench]")'
        print(f"{PEER}: not run, {peer_missing}")
    elif ("lstm", 0) in measurements and args.sizes == "paper":
        measurements.append((PEER, 0))
    slices = {measurement: [] for measurement in measurements}
    for core, actors in interleaved(measurements, args.rounds):
        graphed = core.endswith(GRAPHED)
        started = time.perf_counter()
        done = run_worker(core.removesuffix(GRAPHED), actors, "graphed" if graphed else "auto", args.seconds / args.rounds, args)
        slices[core, actors].append(done)
        # Each slice as it ends, on stderr: a run cut short (a lent GPU's time limit) keeps what it measured.
        measured = done.get("error") or f"{done['frames'] / done['seconds']:,.0f} frames/s, {done['acting_s'] / done['seconds']:.0%} acting"
        print(f"slice {core} ({actors} workers): {measured}; {time.perf_counter() - started:.0f} s with start-up", file=sys.stderr, flush=True)
    results = {measurement: combine(done) for measurement, done in slices.items()}
    comparison = {}
    if not args.no_learner_comparison:
        for core in args.cores:
            if hasattr(CORE_CLASSES[CORES[core][0]][1], "open"):  # can be fed a step at a time
                kept = run_worker(core, 0, "acting_graph", args.seconds, args)
                recompute = run_worker(core, 0, "recompute", args.seconds, args)
                comparison[core] = (recompute.get("update_s"), kept.get("update_s"), "measured")
            else:
                estimate = run_worker(core, 0, "estimate", args.seconds, args)
                comparison[core] = (estimate.get("update_s"), estimate.get("graph_update_s"), "lower bound")
    header = "| core | " + " | ".join(f"{a} workers: frames/s (acting share; bytes moved per frame)" if a
                                      else "in-process: frames/s (acting share; bytes moved per frame)" for a in args.actors)
    lines = [header + " | s/update, recompute | s/update, kept acting graph |", "|---" * (len(args.actors) + 3) + "|"]
    for core in args.cores + [core + GRAPHED for core in args.graphed] + ([PEER] if (PEER, 0) in results else []):
        cells = []
        for actors in args.actors:
            r = results.get((core, actors))  # None: the peer with workers
            cells.append("-" if r is None else r["error"] if "error" in r else f"{r['fps']:,.0f} ({r['acting_share']:.0%}{bytes_moved(r)})")
        recompute, kept, how = comparison.get(core, (None, None, ""))
        cells.append(f"{recompute:.2f}" if recompute else "-")
        cells.append(f"{kept:.2f} ({how})" if kept else "-")
        lines.append(f"| {core} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    print("The trainer's default (learner auto): kept acting graph for feedback, recompute for the others; "
          "CORE+graph: --cuda-graph, the recompute learner acting through one CUDA graph of the policy's step.")
    if (PEER, 0) in results:
        version = importlib.metadata.version("sb3-contrib")
        print(f"{PEER}: sb3-contrib {version} RecurrentPPO doing the lstm row's work per update (benchmarks/recurrent_ppo.py)")
    threads = sorted({n for r in results.values() for n in r.get("threads", [])})
    unlike = "" if len(threads) <= 1 else " (they differ: the ratios compare unlike runs)"
    print(f"torch threads in the workers: {threads}{unlike}; at the end: {load_line()}")
    if args.markdown:
        write_text(args.markdown, "\n".join(lines) + "\n")

    fps = {core: r.get("fps") for (core, actors), r in results.items() if actors == 0}
    status = report(targets(fps, peer_missing, args.sizes), args.check)
    failed = [f"{core} ({actors} workers)" for (core, actors), r in results.items() if "error" in r]
    if failed:
        print(f"FAIL  measurements that crashed (see the table): {', '.join(failed)}")
    return 1 if args.check and failed else status


if __name__ == "__main__":
    sys.exit(main())
