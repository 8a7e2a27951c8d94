"""Env steps per second of the native vector envs against gymnasium's SyncVectorEnv, on one core.

For each env and each batch size N this measures, side by side in one run:
  native  `gymnasium.make_vec(id, num_envs=N)`, the env's own `vector_entry_point`;
  sync    `gymnasium.make_vec(id, num_envs=N, vectorization_mode="sync")`, a SyncVectorEnv
          over N single envs (each wrapped by gymnasium.make as usual);
and prints a markdown table of env steps per second (N * vector steps / seconds).

How each measurement runs: build the env (not timed), reset with a seed (not timed), one
warm-up step, then step with pre-generated random actions until `--seconds` have passed and
the steps have crossed an episode boundary, so that autoresets are timed too. Where crossing
one would take more than 4x `--seconds` (SyncVectorEnv at large N), it stops at `--seconds`;
those rows time no autoreset, which flatters SyncVectorEnv slightly (one single-env reset per
episode), so their ratio is if anything an underestimate.

The process is pinned to one CPU, with numpy's thread pools at one thread, so the numbers are
for one core. At the end it checks the maze target, a ratio within this run: FeedbackRL/Maze-v0
at N = 1024, native >= 50 x sync env steps/s (the two are timed one after the other, seconds
apart; the margin, 210-240x on the project's machines, dwarfs any drift in load between them).

    python benchmarks/envs.py                                   # everything, about 2-3 minutes
    python benchmarks/envs.py --envs maze --sizes 1024 --check  # the target only; exit 1 on FAIL
    python benchmarks/envs.py --seconds 1 --markdown bench.md   # quicker; also write the table
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[_var] = "1"  # before numpy is imported: one core means one thread
if __package__ in (None, ""):
    # Run as a script, Python put this file's folder first on sys.path, where `import envs` would
    # find this file (envs.py) rather than the project's package: the project root takes its place.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)
    sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import envs  # noqa: E402
from envs.cli import env_seed  # noqa: E402
from durable.records import write_text  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402
from benchmarks.targets import Verdict, ratio_target, report  # noqa: E402

TARGET_ENV, TARGET_N = "maze", 1024
TARGET_RATIO = 50  # native / SyncVectorEnv env steps/s at TARGET_N, both measured in this run
ACTION_ROWS = 256  # pre-generated vector steps of actions, cycled through
MAX_OVERRUN = 4  # time at most this many times --seconds to reach an episode boundary


def pin_to_one_cpu(cpu: int | None) -> int | None:
    """Pin this process to `cpu` (default: the last CPU it may run on); return it, or None."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1] if cpu is None else cpu
    if cpu not in allowed:
        raise ValueError(f"cpu {cpu} is not available to this process; choose from {allowed}")
    os.sched_setaffinity(0, {cpu})
    return cpu


def steps_per_second(env_id: str, num_envs: int, mode: str, seconds: float, seed: int) -> tuple[float, int]:
    """Env steps per second of one vector env, and the number of vector steps timed."""
    kwargs = {} if mode == "native" else {"vectorization_mode": "sync"}
    env = gym.make_vec(env_id, num_envs=num_envs, **kwargs)
    # An env without a registered limit ends its own episodes (the T-maze's: 11 steps), which
    # any timing of `seconds` spans: then only the time decides.
    episode_steps = gym.spec(env_id).max_episode_steps or 1
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, env.single_action_space.n, size=(ACTION_ROWS, num_envs))  # (T, N)
    env.reset(seed=seed)
    env.step(actions[-1])  # warm-up
    # After the warm-up, the episode ends at timed step episode_steps - 1 and the next step
    # autoresets (NEXT_STEP mode), so `steps >= episode_steps` includes one autoreset.
    steps = 0
    start = time.perf_counter()
    while True:
        env.step(actions[steps % ACTION_ROWS])
        steps += 1
        elapsed = time.perf_counter() - start
        boundary_too_far = elapsed / steps * episode_steps > MAX_OVERRUN * seconds
        if elapsed >= seconds and (steps >= episode_steps or boundary_too_far):
            break
    env.close()
    return num_envs * steps / elapsed, steps


def targets(results: dict[tuple[str, int], tuple[float, float]]) -> list[Verdict]:
    """The verdict from this run's {(env id, N): (native, sync) env steps/s}."""
    native, sync = results.get((envs.env_id(TARGET_ENV), TARGET_N), (None, None))
    return [ratio_target(f"{envs.env_id(TARGET_ENV)} N={TARGET_N} native / SyncVectorEnv steps/s", native, sync, TARGET_RATIO,
                         f"needs --envs {TARGET_ENV} --sizes {TARGET_N}")]


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(envs.ENV_IDS), help="short names or ids")
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 64, 1024, 4096], help="values of N")
    parser.add_argument("--seconds", type=float, default=3.0, help="target time per measurement")
    parser.add_argument("--seed", type=env_seed, default=0)
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: the last one)")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the maze targets pass")
    args = parser.parse_args()
    try:
        env_ids = [envs.env_id(name) for name in args.envs]
        cpu = pin_to_one_cpu(args.cpu)
    except ValueError as e:
        parser.error(str(e))
    for n in args.sizes:
        if n < 1:
            parser.error(f"sizes must be >= 1, got {n}")

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, gymnasium {gym.__version__}, "
        f"{os.cpu_count()} CPUs ({cpu_model()}), pinned to CPU {cpu if cpu is not None else 'none (unsupported)'}; {load_line()}"
    )
    print(
        f"target {args.seconds:g} s per measurement; env construction and the first reset not timed; "
        "SyncVectorEnv is gymnasium.make_vec(..., vectorization_mode='sync')\n"
    )

    header = "| env | N | native steps/s | SyncVectorEnv steps/s | ratio | vector steps timed (native / sync) |"
    lines = [header, "|---|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    results = {}
    for env_id in env_ids:
        for n in args.sizes:
            native, native_steps = steps_per_second(env_id, n, "native", args.seconds, args.seed)
            sync, sync_steps = steps_per_second(env_id, n, "sync", args.seconds, args.seed)
            results[env_id, n] = (native, sync)
            row = [env_id, n, f"{native:,.0f}", f"{sync:,.0f}", f"{native / sync:,.1f}", f"{native_steps} / {sync_steps}"]
            lines.append("| " + " | ".join(map(str, row)) + " |")
            print(lines[-1], flush=True)
    episodes = ", ".join(f"{env_id} {gym.spec(env_id).max_episode_steps or 'its own'}" for env_id in env_ids)
    print(f"\nepisode lengths (vector steps): {episodes}; fewer steps timed than that means no autoreset was timed")
    if args.markdown:
        write_text(args.markdown, "\n".join(lines) + "\n")
        print(f"table written to {args.markdown}")

    print(f"\nat the end: {load_line()}")
    return report(targets(results), args.check)


if __name__ == "__main__":
    sys.exit(main())
