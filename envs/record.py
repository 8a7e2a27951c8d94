"""Record a rollout of the random or oracle policy as a GIF (or show it in a window).

    python -m envs.record maze --policy oracle --steps 200 --out maze_oracle.gif
    python -m envs.record water_maze --policy random --render human

Draws env 0 of the batch every step and prints the episode returns it saw.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import imageio.v3 as iio
import numpy as np

import envs
from durable.records import atomic_file
from envs.baselines import POLICIES, random_policy
from envs.cli import env_name, env_seed, positive_int
from envs.oracle import make_oracle


def record(name: str, policy: str, steps: int, seed: int, render_mode: str = "rgb_array") -> tuple[list, list[float]]:
    """Frames (H, W, 3) of `steps` steps of env 0 (None in human mode) and its episode returns,
    the last one possibly unfinished."""
    env = gym.make_vec(envs.env_id(name), num_envs=1, render_mode=render_mode)
    env.reset(seed=seed)
    act = random_policy(env, seed) if policy == "random" else make_oracle(env)
    frames, returns, running = [env.render()], [], 0.0
    for _ in range(steps):
        _, reward, terminated, truncated, _ = env.step(act())
        running += float(reward[0])
        if terminated[0] or truncated[0]:
            returns.append(running)
            running = 0.0
        frames.append(env.render())
    env.close()
    return frames, returns + [running] if running or not returns else returns


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env", type=env_name, help=f"one of {sorted(envs.ENV_IDS)} or a registered id")
    parser.add_argument("--policy", default="oracle", choices=POLICIES)
    parser.add_argument("--steps", type=positive_int, default=200)
    parser.add_argument("--seed", type=env_seed, default=0)
    parser.add_argument("--render", default="rgb_array", choices=["rgb_array", "human"])
    parser.add_argument("--out", default=None, help="GIF path (rgb_array mode); default <env>_<policy>.gif")
    parser.add_argument("--fps", type=positive_int, default=8)
    args = parser.parse_args(argv)
    name = envs.env_id(args.env)
    frames, returns = record(name, args.policy, args.steps, args.seed, args.render)
    print(f"{name} {args.policy}: episode returns {returns}")
    if args.render == "rgb_array":
        out = args.out or f"{args.env.split('/')[-1].lower()}_{args.policy}.gif"
        with atomic_file(out, "wb") as file:
            iio.imwrite(file, np.stack(frames), extension=".gif", duration=1000 / args.fps, loop=0)
        print(f"wrote {len(frames)} frames to {out}")


if __name__ == "__main__":
    main()
