"""End-to-end A2C training frames per second of every core on the maze, side by side.

One fixed config for all: the maze, B = 64 envs, rollouts of T = 100 steps (the paper's BPTT),
Adam; cores at the paper's maze sizes (feedback, transformer, reservoir: 2 layers, d_model 256,
4 heads, span 200) except the LSTM at 1 layer x 256 (the size the target names) and the MLP at
2 x 256. Each (core, actor workers) pair runs in a subprocess of its own: it builds the trainer
(agents/train.py), takes one untimed update (warm-up, and memory filling up), then updates until
`--seconds` have passed (at least two), and reports frames per second = frames / seconds, and the
split between acting (collecting the rollout, envs included) and learning (the forward and
backward pass over the chunk and the optimiser step).

It also answers "should the learner keep the acting graph instead of recomputing the chunk?":
per core, one rollout acting with gradients on (each T = 1 call's graph kept) and one backward
pass through all of them, against the trainer's no-grad acting plus recompute. The core
interface hands back a detached state, so the kept graph lacks the gradient paths through the
memory: its time is a lower bound on what a graph-keeping learner would pay.

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


def make_trainer(core: str, actors: int, device: str, threads: int):
    from agents.a2c_config import resolve_config
    from agents.train import Trainer

    name, options = CORES[core]
    config = resolve_config(dict(env="maze", core=name, preset="cpu", num_envs=NUM_ENVS, rollout=ROLLOUT, optimizer="adam",
                                 num_actors=actors, device=device, threads=threads, core_options=options,
                                 run_dir="/tmp/unused-benchmark-run"))
    return Trainer(config)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(core: str, actors: int, device: str, threads: int, seconds: float, graph: bool) -> dict:
    trainer = make_trainer(core, actors, device, threads)
    try:
        trainer.update()  # warm-up: memory fills, allocator settles
        acting = learning = 0.0
        updates = 0
        while updates < 2 or acting + learning < seconds:
            started = time.perf_counter()
            trainer.policy.eval()
            rollout, _ = trainer.actor.collect(ROLLOUT)
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
        if graph:
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
        action = torch.multinomial(torch.softmax(logits[0].detach(), -1), 1).squeeze(-1)
        next_obs, reward, terminated, truncated, info = actor.pool.step(action.cpu().numpy())
        actor._advance(next_obs, action.cpu().numpy(), reward, terminated | truncated, info)
        total = total + logits.logsumexp(-1).mean() + value.mean()  # stands in for the A2C loss
    trainer.optimizer.zero_grad(set_to_none=True)
    total.backward()
    trainer.optimizer.step()
    sync(trainer.device)
    return time.perf_counter() - started


def run_worker(core: str, actors: int, args) -> dict:
    command = [sys.executable, __file__, "--worker", core, str(actors), "--device", args.device, "--threads", str(args.threads),
               "--seconds", str(args.seconds)] + (["--graph"] if actors == 0 else [])
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
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the targets pass")
    parser.add_argument("--graph", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", nargs=2, metavar=("CORE", "ACTORS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        core, actors = args.worker[0], int(args.worker[1])
        print(json.dumps(measure(core, actors, args.device, args.threads, args.seconds, args.graph)))
        return 0

    print(f"# A2C training frames/s, maze, B={NUM_ENVS}, T={ROLLOUT}; {cpu_model()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, device {args.device}")
    results = {(core, actors): run_worker(core, actors, args) for core in args.cores for actors in args.actors}
    header = "| core | " + " | ".join(f"{a} workers: frames/s (acting share)" if a else "in-process: frames/s (acting share)" for a in args.actors)
    lines = [header + " | recompute s/update | kept acting graph s/update (lower bound) |",
             "|---" * (len(args.actors) + 3) + "|"]
    for core in args.cores:
        cells = []
        for actors in args.actors:
            r = results[(core, actors)]
            cells.append(r["error"] if "error" in r else f"{r['fps']:,.0f} ({r['acting_share']:.0%})")
        local = results.get((core, 0), {})
        graph = f"{local['update_s']:.2f} | {local['graph_update_s']:.2f}" if "graph_update_s" in local else "- | -"
        lines.append(f"| {core} | " + " | ".join(cells) + f" | {graph} |")
    print("\n".join(lines))
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
