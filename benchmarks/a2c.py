"""End-to-end A2C training frames per second of every core on the maze, side by side.

One fixed config for all: the maze, B = 64 envs, rollouts of T = 100 steps (the paper's BPTT),
Adam; cores at the paper's maze sizes (feedback, transformer, reservoir: 2 layers, d_model 256,
4 heads, span 200) except the LSTM at 1 layer x 256 (the size the target names) and the MLP at
2 x 256. Each (core, actor workers) pair runs in a subprocess of its own: it builds the trainer
(agents/train.py), takes one untimed update (warm-up, and memory filling up), then updates until
`--seconds` have passed (at least two), and reports frames per second = frames / seconds, and the
split between acting (collecting the rollout, envs included) and learning (the forward and
backward pass over the chunk and the optimiser step).

It also answers "should the learner keep the acting graph instead of recomputing the chunk?",
per core, in seconds per update (in-process): the feedback and LSTM cores can be fed a step at
a time within one call, so both learners run for real (`learner` acting_graph and recompute).
The other cores' calls hand back a detached state, so for them keeping the graph is estimated: one
rollout acting with gradients on (each T = 1 call's graph kept) and one backward pass through
all of them, a lower bound on what a graph-keeping learner would pay (it lacks the gradient
paths through the memory), against the trainer's no-grad acting plus recompute.

Targets on a 2-core CPU: feedback >= 0.7 x transformer frames/s (no workers), and the LSTM
(1 x 256) >= 9,000 frames/s end to end.

    python benchmarks/a2c.py                       # everything, about 5 minutes on 2 cores
    python benchmarks/a2c.py --cores feedback transformer --actors 0 --check
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from agents.cores import CORES as CORE_CLASSES  # noqa: E402
from benchmarks.machine import cpu_model  # noqa: E402

ATTENTION = {"d_model": 256, "n_layers": 2, "n_heads": 4, "span": 200}
CORES = {
    "feedback": ("feedback", ATTENTION),
    "transformer": ("transformer", ATTENTION),
    "lstm": ("lstm", {"hidden_size": 256, "n_layers": 1}),
    "reservoir": ("reservoir", {**ATTENTION, "kind": "ffn", "n_reservoir": 1}),
    "mlp": ("mlp", {"hidden_size": 256, "n_layers": 2}),
}
NUM_ENVS, ROLLOUT = 64, 100


def make_trainer(core: str, actors: int, device: str, threads: int, learner: str = "auto"):
    from agents.a2c_config import resolve_config
    from agents.train import Trainer

    name, options = CORES[core]
    config = resolve_config(dict(env="maze", core=name, preset="cpu", num_envs=NUM_ENVS, rollout=ROLLOUT, optimizer="adam",
                                 num_actors=actors, device=device, threads=threads, core_options=options, learner=learner,
                                 run_dir="/tmp/unused-benchmark-run"))
    return Trainer(config)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(core: str, actors: int, device: str, threads: int, seconds: float, learner: str) -> dict:
    """Frames/s of training, and the acting share of the time; with learner "estimate", the
    seconds per update of recomputing against the kept-graph lower bound instead."""
    trainer = make_trainer(core, actors, device, threads, "recompute" if learner == "estimate" else learner)
    try:
        trainer.update()  # warm-up: memory fills, allocator settles
        acting = learning = 0.0
        updates = 0
        while updates < 2 or acting + learning < seconds:
            started = time.perf_counter()
            trainer.policy.train(trainer.keep_graph)
            rollout, _ = trainer.actor.collect(ROLLOUT, trainer.keep_graph)
            sync(trainer.device)
            collected = time.perf_counter()
            trainer.policy.train()
            trainer.learn(rollout)
            sync(trainer.device)
            acting += collected - started
            learning += time.perf_counter() - collected
            updates += 1
        frames = updates * NUM_ENVS * ROLLOUT
        result = {"fps": frames / (acting + learning), "acting_share": acting / (acting + learning), "update_s": (acting + learning) / updates}
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
    for _ in range(ROLLOUT):
        obs, prev_action, prev_reward, first = actor.inputs()
        logits, value, actor.state = policy(obs, prev_action, prev_reward, first, actor.state)
        actor._act(logits[0].detach(), greedy=False)  # sample, step the envs, move on
        total = total + logits.logsumexp(-1).mean() + value.mean()  # stands in for the A2C loss
    trainer.optimizer.zero_grad(set_to_none=True)
    total.backward()
    trainer.optimizer.step()
    sync(trainer.device)
    return time.perf_counter() - started


def run_worker(core: str, actors: int, learner: str, args) -> dict:
    command = [sys.executable, __file__, "--worker", core, str(actors), learner, "--device", args.device,
               "--threads", str(args.threads), "--seconds", str(args.seconds)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", nargs="+", default=list(CORES), choices=list(CORES))
    parser.add_argument("--actors", nargs="+", type=int, default=[0, 2], help="actor worker counts to compare (0: envs in the learner)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="learner torch threads (0: torch's default)")
    parser.add_argument("--seconds", type=float, default=10.0, help="timed training per measurement (at least two updates)")
    parser.add_argument("--no-learner-comparison", action="store_true", help="skip the kept-graph against recompute columns")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the targets pass")
    parser.add_argument("--worker", nargs=3, metavar=("CORE", "ACTORS", "LEARNER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        core, actors, learner = args.worker[0], int(args.worker[1]), args.worker[2]
        print(json.dumps(measure(core, actors, args.device, args.threads, args.seconds, learner)))
        return 0

    print(f"# A2C training frames/s, maze, B={NUM_ENVS}, T={ROLLOUT}; {cpu_model()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, device {args.device}")
    results = {(core, actors): run_worker(core, actors, "auto", args) for core in args.cores for actors in args.actors}
    comparison = {}
    if not args.no_learner_comparison:
        for core in args.cores:
            if hasattr(CORE_CLASSES[CORES[core][0]][1], "open"):  # can be fed a step at a time
                kept = run_worker(core, 0, "acting_graph", args)
                recompute = run_worker(core, 0, "recompute", args)
                comparison[core] = (recompute.get("update_s"), kept.get("update_s"), "measured")
            else:
                estimate = run_worker(core, 0, "estimate", args)
                comparison[core] = (estimate.get("update_s"), estimate.get("graph_update_s"), "lower bound")
    header = "| core | " + " | ".join(f"{a} workers: frames/s (acting share)" if a else "in-process: frames/s (acting share)" for a in args.actors)
    lines = [header + " | s/update, recompute | s/update, kept acting graph |", "|---" * (len(args.actors) + 3) + "|"]
    for core in args.cores:
        cells = []
        for actors in args.actors:
            r = results[(core, actors)]
            cells.append(r["error"] if "error" in r else f"{r['fps']:,.0f} ({r['acting_share']:.0%})")
        recompute, kept, how = comparison.get(core, (None, None, ""))
        cells.append(f"{recompute:.2f}" if recompute else "-")
        cells.append(f"{kept:.2f} ({how})" if kept else "-")
        lines.append(f"| {core} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    print("The trainer's default (learner auto): kept acting graph for feedback, recompute for the others.")
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")

    verdicts = []
    fps = lambda core: results.get((core, 0), {}).get("fps")  # noqa: E731
    if fps("feedback") and fps("transformer"):
        ratio = fps("feedback") / fps("transformer")
        verdicts.append(("feedback / transformer >= 0.7", ratio >= 0.7, f"{ratio:.2f}"))
    if fps("lstm"):
        verdicts.append(("lstm 1x256 >= 9,000 frames/s", fps("lstm") >= 9000, f"{fps('lstm'):,.0f}"))
    for name, passed, value in verdicts:
        print(f"{'PASS' if passed else 'FAIL'}  {name}: {value}")
    return 0 if not args.check or all(passed for _, passed, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
