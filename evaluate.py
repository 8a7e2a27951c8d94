"""Evaluate a trained A2C agent beside the random and oracle policies, and render it.

    python evaluate.py runs/corridor-lstm-demo --episodes 100 --greedy
    python evaluate.py runs/maze-feedback-20261121-120000/checkpoint.pt --render human
    python evaluate.py runs/corridor-lstm-demo --greedy --video corridor.gif --video-episodes 3
    python evaluate.py runs/tmaze-lstm-dqn --epsilon 0.05          # a DQN run, epsilon-greedy at 0.05

Prints the mean ± standard deviation of the return, episode length and the env's metric
(success, targets_reached or goals_reached) for the agent and for the random and oracle policies
on the same env options, episodes and seed (random only for envs other than ours, which have no
oracle), then the same numbers as one JSON line. Without --greedy an A2C or PPO policy samples
its actions, and a DQN run acts epsilon-greedy on its Q values as it trained, at the epsilon of
its last frame (--epsilon to choose another). Rendering and videos use the env's own
`human` and `rgb_array` modes. `--render
human` shows, and `--video` writes (.gif, or .mp4 with imageio-ffmpeg), the first
`--video-episodes` episodes of one env seeded like env 0 of the evaluation. Evaluation envs draw
streams of their own, never a training run's, whatever `--seed` (agents/runtime/seeding.py:env_seeds).
The logic lives in agents/evaluation.py.
"""

from __future__ import annotations

import argparse
import json

from agents.runtime.checkpoint import CheckpointError
from agents.runtime.device import resolve_device
from agents.learners.run_size import check_evaluation_fits
from agents.cores.checks import check_float
from agents.evaluation import check_render_mode, evaluate, evaluation_seeds, load_run, render_episodes, summary_json, video_format_problem, write_video
from envs.baselines import evaluate_baseline, policies, summary
from envs.cli import env_seed, positive_int


def video_path(text: str) -> str:
    """An output path whose format can be written (checked before the evaluation runs)."""
    problem = video_format_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", metavar="RUN_DIR_or_CHECKPOINT", help="a run folder holding checkpoint.pt, or the file")
    parser.add_argument("--episodes", type=positive_int, default=100, help="episodes per policy (default: 100)")
    parser.add_argument("--num-envs", type=positive_int, default=None, help="envs run together (default: min(episodes, 16))")
    parser.add_argument("--seed", type=env_seed, default=0, help="picks the evaluation envs' streams (disjoint from training's); also seeds sampled actions (default: 0)")
    parser.add_argument("--greedy", action="store_true", help="take the most likely action (a DQN's highest Q) instead of sampling")
    parser.add_argument("--epsilon", type=float, default=None,
                        help="a DQN run: act epsilon-greedy with this epsilon in [0, 1] (default: the run's at its last frame)")
    parser.add_argument("--device", default="auto", help="auto (CUDA if present, else CPU), cpu, cuda, cuda:N")
    parser.add_argument("--render", choices=["human"], default=None, help="show episodes in a pygame window")
    parser.add_argument("--video", type=video_path, default=None, metavar="OUT", help="write episodes to OUT (.gif, or .mp4 with imageio-ffmpeg)")
    parser.add_argument("--video-episodes", type=positive_int, default=3, help="episodes shown or written (default: 3)")
    parser.add_argument("--env-module", action="append", default=[], metavar="MODULE",
                        help="let the checkpoint's env id import MODULE (module:EnvId); only minigrid, popgym and modules "
                             "named here are imported from a checkpoint (repeatable)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.render and args.video:
        parser.error("--render human and --video cannot be combined: a window and a video need different render modes")
    if args.greedy and args.epsilon is not None:
        parser.error(f"--epsilon {args.epsilon} and --greedy cannot be combined: greedy takes the highest Q at every step")
    num_envs = args.num_envs or min(args.episodes, 16)
    try:
        check_evaluation_fits(args.episodes, num_envs)  # before anything is allocated (agents/learners/run_size.py)
        if args.epsilon is not None:
            check_float("--epsilon", args.epsilon, 0, 1)
        run = load_run(args.run, resolve_device(args.device), args.env_module)
        if args.epsilon is not None:
            if run.epsilon is None:
                raise ValueError(f"--epsilon {args.epsilon}: {args.run} is not a DQN run; its policy samples its actions "
                                 f"(or --greedy takes the likeliest)")
            run.epsilon = args.epsilon
        if args.render or args.video:
            check_render_mode(run.config, args.render or "rgb_array")  # before the evaluation, not after it
    except (CheckpointError, ValueError) as error:
        parser.error(str(error))
    config = run.config
    mode = "greedy" if args.greedy else "sampled" if run.epsilon is None else f"epsilon-greedy (epsilon {run.epsilon:.4g})"
    options = ",".join(f"{key}={value}" for key, value in config.env_options.items())
    print(f"{config.env}{f' ({options})' if options else ''}, {config.core} core trained {run.global_step:,} frames "
          f"({args.run}): {args.episodes} episodes, seed {args.seed}, {mode} actions")
    results = {"agent": evaluate(run, args.episodes, args.seed, num_envs, args.greedy)}
    for policy in policies(config.env):
        seeds = evaluation_seeds(args.seed, num_envs)  # the agent's envs: the same episodes
        results[policy] = evaluate_baseline(config.env, policy, args.episodes, seeds, num_envs, **config.env_options)
    for name, values in results.items():
        print(f"{name:>6}: {summary(values)}")
    if args.render or args.video:
        frames, returns, fps = render_episodes(run, args.video_episodes, args.seed, args.greedy, args.render or "rgb_array")
        if args.video:
            write_video(args.video, frames, fps)
            print(f"wrote {len(frames)} frames ({fps} fps) of episodes with returns {returns} to {args.video}")
        else:
            print(f"showed {len(returns)} episodes with returns {returns}")
    print(json.dumps({
        "run": args.run, "env": config.env, "env_options": config.env_options, "core": config.core,
        "global_step": run.global_step, "episodes": args.episodes, "seed": args.seed, "greedy": args.greedy,
        **({"epsilon": run.epsilon} if run.epsilon is not None and not args.greedy else {}),
        "results": {name: summary_json(values) for name, values in results.items()},
    }))


if __name__ == "__main__":
    main()
