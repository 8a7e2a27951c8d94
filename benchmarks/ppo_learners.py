"""PPO's Feedback agent with each of its learners, timed in one process: how much of an update the
cached memory saves.

    python benchmarks/ppo_learners.py                        # CPU, one thread, 3 interleaved rounds
    python benchmarks/ppo_learners.py --device cuda --graphed   # on a GPU, acting through a CUDA graph too

`recompute` (the default learner) runs each minibatch's steps one after another, from the stored
start state. `cached_memory` runs them all at once, reading the memory acting wrote
(agents/cores/feedback/cached.py). Both train the Feedback agent of experiments/ppo_peers.py at
CleanRL's MemoryS9 recipe: 16 envs, 256-step rollouts, 3 epochs of 8 minibatches, d 256, 2 layers,
4 heads, span 24. The task is our bsuite memory_len at L = 23 (`--length`), whose episodes are 24
steps, the length at which the PPO goal is set (docs/speed.md). It stands in for MiniGrid's
24-step MemoryS9, so that it needs no MiniGrid and runs on a lent GPU machine as it is.

Each round times one update (acting and learning apart) of each learner in turn, after a warm-up
update of each. The result is the ratio of their update times within this run. Absolute figures
are this machine's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from agents.config.a2c_config import resolve_config  # noqa: E402
from agents.learners.ppo import PPOTrainer  # noqa: E402
from agents.runtime.precision import autocast  # noqa: E402
from benchmarks.targets import interleaved  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402

LEARNERS = ("recompute", "cached_memory")
RECIPE = dict(num_envs=16, rollout=256, update_epochs=3, num_minibatches=8, clip_coef=0.2, learning_rate=2.75e-4, gamma=0.995,
              gae_lambda=0.95, entropy_coef=1e-4, value_coef=0.5, max_grad_norm=0.25, optimizer="adam", optimizer_eps=1e-5,
              norm_adv=False, previous_inputs=False)
CORE = {"d_model": 256, "n_layers": 2, "n_heads": 4, "span": 24}


def make_trainer(learner: str, args: argparse.Namespace) -> PPOTrainer:
    given = dict(env="memory_length", env_options={"length": args.length}, core="feedback", core_options=CORE, preset="cpu",
                 learner=learner, device=args.device, cuda_graph=args.graphed, threads=args.threads, seed=0,
                 run_dir=f"/tmp/unused-benchmark-run-{learner}", **{**RECIPE, "num_envs": args.envs, "rollout": args.rollout})
    return PPOTrainer(resolve_config(given, PPOTrainer.config_class))


def timed_update(trainer: PPOTrainer) -> tuple[float, float]:
    """(acting, learning) seconds of one update, the device synchronised at each end."""
    c, sync = trainer.config, (torch.cuda.synchronize if trainer.device.type == "cuda" else lambda: None)
    started = time.perf_counter()
    trainer.policy.train(trainer.keep_graph)
    with autocast(trainer.device, c.precision):
        rollout, _ = trainer.actor.collect(c.rollout, trainer.keep_graph, trainer.keeps_acting_outputs, trainer.keeps_acting_memory)
    sync()
    acted = time.perf_counter()
    trainer.policy.train()
    trainer.learn(rollout)
    sync()
    return acted - started, time.perf_counter() - acted


def main(argv: list[str] | None = None) -> dict[str, tuple[float, float]]:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--graphed", action="store_true", help="act through a CUDA graph (--cuda-graph; a CUDA device)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1; 0: torch's default)")
    parser.add_argument("--rounds", type=int, default=3, help="timed updates of each learner, interleaved")
    parser.add_argument("--length", type=int, default=23, help="memory_len's L: episodes of L + 1 steps (default 23: 24 steps)")
    parser.add_argument("--envs", type=int, default=RECIPE["num_envs"], help="envs, a multiple of 8 (default: the recipe's 16)")
    parser.add_argument("--rollout", type=int, default=RECIPE["rollout"], help="steps per rollout (default: the recipe's 256)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    trainers = {learner: make_trainer(learner, args) for learner in LEARNERS}
    try:
        for trainer in trainers.values():
            trainer.update()  # warm-up: buffers, the compiled step, the graph's capture
        times = {learner: [0.0, 0.0] for learner in LEARNERS}
        for learner in interleaved(LEARNERS, args.rounds):
            acting, learning = timed_update(trainers[learner])
            times[learner][0] += acting / args.rounds
            times[learner][1] += learning / args.rounds
    finally:
        for trainer in trainers.values():
            trainer.close()
    frames = trainers["recompute"].config.num_envs * trainers["recompute"].config.rollout
    print(f"# PPO's Feedback agent, one update of {frames:,} frames, memory_len L = {args.length}; {cpu_model()}, torch {torch.__version__}, "
          f"device {args.device}{' (acting graphed)' if args.graphed else ''}, {torch.get_num_threads()} threads, "
          f"{args.rounds} interleaved rounds; {load_line()}")
    print("| learner | acting s | learning s | update s | frames/s |\n|---|---|---|---|---|")
    for learner, (acting, learning) in times.items():
        print(f"| {learner} | {acting:.2f} | {learning:.2f} | {acting + learning:.2f} | {frames / (acting + learning):,.0f} |")
    (ra, rl), (ca, cl) = times["recompute"], times["cached_memory"]
    print(f"cached_memory / recompute: update time {(ca + cl) / (ra + rl):.2f}, learning time {cl / rl:.2f}")
    return {learner: (acting, learning) for learner, (acting, learning) in times.items()}


if __name__ == "__main__":
    main()
