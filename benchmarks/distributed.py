"""What several processes cost: A2C frames/s with 1 and 2 ranks side by side, and the gradient
all-reduce per update at the paper's model sizes, on gloo (CPU).

1. Frames/s, 1 rank against 2 ranks, the same global batch (the maze, feedback d 64, 2 layers,
   span 64, `--num-envs` envs, rollouts of `--rollout`), each under `torchrun --standalone`, in
   `--rounds` interleaved slices of `--seconds` / `--rounds` (agents/learners/train.py's update plus the
   loop's per-update agreement on stopping, after one untimed update). Both get the same CPU
   threads in total (`--threads`: one rank all of them, two ranks half each), so on a machine
   whose cores are all busy either way (the 2-core machine this was written on) the ratio
   measures the overhead of distributing (all-reduce, gathering episodes, lockstep waits), not a
   speed-up; with one GPU or many cores per rank the second rank adds its own hardware instead.
   Run it on idle cores: on busy ones more threads than free cores slow torch's many small ops
   several times over (here, loaded: a paper-size update took 0.25 s on 1 thread, 1.7-6 s on 2),
   which would be charged to whichever side has more threads per process.
2. The all-reduce of one update's flattened gradient (agents/runtime/distributed.sum_gradients, what
   the learner that keeps the acting graph does; DDP's buckets move the same bytes) between 2
   ranks, at the paper's maze sizes: the Feedback Transformer (d 256, 2 layers, 4 heads, span
   200) and the LSTM (3 x 256); beside it, one single-process update of the feedback model at B =
   `--update-envs`, T = 100, timed in the same run.

Targets (ratios within this run): 2-rank / 1-rank frames/s >= 0.7 (distributing costs under
30% where it cannot speed up), and feedback update / all-reduce >= 10 (the exchange is small
beside the work it distributes).

    python benchmarks/distributed.py                 # several minutes
    python benchmarks/distributed.py --quick         # a minute: checks that it runs, measures nothing
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from agents.runtime import distributed  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402
from benchmarks.targets import Verdict, interleaved, ratio_target, report  # noqa: E402

SMALL = {"d_model": 64, "n_layers": 2, "n_heads": 4, "span": 64}
PAPER = {"feedback": ("feedback", {"d_model": 256, "n_layers": 2, "n_heads": 4, "span": 200}),
         "lstm": ("lstm", {"hidden_size": 256, "n_layers": 3})}
TARGETS = {"frames/s 2 ranks / 1 rank": 0.7, "feedback update / all-reduce": 10.0}


def make_trainer(core: str, options: dict, num_envs: int, rollout: int, threads: int):
    from agents.config.a2c_config import resolve_config
    from agents.learners.train import Trainer

    return Trainer(resolve_config(dict(env="maze", core=core, preset="cpu", num_envs=num_envs, rollout=rollout, threads=threads,
                                       core_options=options, device="cpu", run_dir="/tmp/unused-benchmark-run")))


def frames_worker(args) -> None:
    """One rank of part 1: rank 0 prints {"frames": ..., "seconds": ...} of the timed updates."""
    trainer = make_trainer("feedback", SMALL, args.num_envs, args.rollout, args.threads)
    try:
        trainer.update()  # untimed: warm-up, memory filling up
        frames, started = 0, time.perf_counter()
        while not distributed.any_rank([time.perf_counter() - started >= args.seconds], "agreeing to stop")[0]:
            trainer.update()
            frames += args.num_envs * args.rollout
        if trainer.world.main:
            print(json.dumps({"frames": frames, "seconds": time.perf_counter() - started}))
    finally:
        trainer.close()
        distributed.close()


def parameter_count(core: str) -> int:
    from agents.runtime.actors import LocalEnvs
    from agents.model.policy import Policy

    name, options = PAPER[core]
    env = LocalEnvs("maze", [0])
    policy = Policy(env.observation_space, env.num_actions, name, options)
    env.close()
    return sum(p.numel() for p in policy.parameters() if p.requires_grad)


def allreduce_worker(args) -> None:
    """One rank of part 2: rank 0 prints {core: seconds per all-reduce of its gradient}."""
    world = distributed.init()
    torch.set_num_threads(args.threads)
    seconds = {}
    for core in PAPER:
        parameter = torch.nn.Parameter(torch.zeros(parameter_count(core)))
        parameter.grad = torch.randn_like(parameter)
        distributed.sum_gradients([parameter])  # untimed: the first exchange sets up buffers
        started = time.perf_counter()
        for _ in range(args.repeats):
            distributed.sum_gradients([parameter])
        seconds[core] = (time.perf_counter() - started) / args.repeats
    if world.main:
        print(json.dumps(seconds))
    distributed.close()


def launch(nprocs: int, args, role: str, seconds: float) -> dict:
    """This script as `role` under torchrun with `nprocs` ranks; rank 0's JSON line."""
    threads = max(1, args.threads // nprocs)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nprocs}", str(Path(__file__)),
               "--role", role, "--threads", str(threads), "--seconds", str(seconds), "--num-envs", str(args.num_envs),
               "--rollout", str(args.rollout), "--repeats", str(args.repeats)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if result.returncode != 0:
        raise RuntimeError(f"{role} with {nprocs} ranks failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def update_seconds(args) -> float:
    """Seconds of one single-process update of the paper-size feedback model (B = update_envs,
    T = update_steps), after an untimed one."""
    name, options = PAPER["feedback"]
    trainer = make_trainer(name, options, args.update_envs, args.update_steps, args.threads)
    try:
        trainer.update()
        started = time.perf_counter()
        trainer.update()
        return time.perf_counter() - started
    finally:
        trainer.close()


def targets(rate: dict[int, float], update: float, allreduce: dict[str, float]) -> list[Verdict]:
    """The verdicts from this run's frames/s per rank count {1: ..., 2: ...}, the seconds of one
    paper-size feedback update in one process, and the seconds per all-reduce of each model's
    gradient {core: ...}."""
    return [
        ratio_target("frames/s 2 ranks / 1 rank", rate[2], rate[1], TARGETS["frames/s 2 ranks / 1 rank"], ""),
        ratio_target("feedback update / all-reduce", update, allreduce["feedback"], TARGETS["feedback update / all-reduce"], ""),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="timed seconds per rank count, over all rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-envs", type=int, default=32, help="global envs in part 1 (split across the ranks)")
    parser.add_argument("--rollout", type=int, default=32)
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads in total (each rank: its share)")
    parser.add_argument("--repeats", type=int, default=20, help="all-reduces timed per model size")
    parser.add_argument("--update-envs", type=int, default=64, help="envs of the single-process paper-size update")
    parser.add_argument("--update-steps", type=int, default=100, help="its rollout (the paper's BPTT)")
    parser.add_argument("--quick", action="store_true", help="a few seconds in all: checks that it runs")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the targets pass")
    parser.add_argument("--role", choices=["main", "frames", "allreduce"], default="main", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "frames":
        return frames_worker(args) or 0
    if args.role == "allreduce":
        return allreduce_worker(args) or 0
    if args.quick:
        args.seconds, args.rounds, args.num_envs, args.rollout, args.repeats = 2.0, 1, 4, 8, 2
        args.update_envs, args.update_steps = 4, 10

    print(f"{cpu_model()}; {load_line()}; torch {torch.__version__}; gloo; {args.threads} threads in total")
    totals = {1: [0, 0.0], 2: [0, 0.0]}
    for nprocs in interleaved([1, 2], args.rounds):
        slice_ = launch(nprocs, args, "frames", args.seconds / args.rounds)
        totals[nprocs][0] += slice_["frames"]
        totals[nprocs][1] += slice_["seconds"]
    rate = {n: frames / seconds for n, (frames, seconds) in totals.items()}
    print(f"frames/s, {args.num_envs} envs in all, T = {args.rollout}, feedback d 64: 1 rank {rate[1]:,.0f}, 2 ranks {rate[2]:,.0f}")
    allreduce = launch(2, args, "allreduce", 0)
    update = update_seconds(args)
    for core, seconds in allreduce.items():
        print(f"all-reduce of the {core} gradient ({parameter_count(core):,} floats) between 2 ranks: {1e3 * seconds:.1f} ms per update")
    print(f"one paper-size feedback update in one process (B = {args.update_envs}, T = {args.update_steps}): {update:.2f} s")
    if args.quick:
        print("--quick: sizes too small to measure anything; the verdicts below only show the lines")
    return report(targets(rate, update, allreduce), args.check)


if __name__ == "__main__":
    distributed.run_command(lambda: sys.exit(main()))  # the workers under torchrun end without Python's shutdown
