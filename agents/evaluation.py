"""Judging a trained A2C agent: its episodes' returns and metrics, and rendered episodes.

`load_run` rebuilds the policy from a checkpoint alone (the checkpoint carries its config).
`evaluate` runs it on B envs through the same `Actor` the trainer acts with, so memory is carried
step to step and forgotten at each episode's first step exactly as in training; each env
contributes a fixed quota of its first episodes, as envs/baselines.py:run_episodes does for the
random and oracle policies, so short episodes are not over-represented and the numbers compare
one to one. Its envs draw evaluation streams (agents/runtime/seeding.py:env_seeds), never those of a
training run, whatever the seeds. `render_episodes` runs one env (seeded like env 0 of
`evaluate`) with a render mode, for a pygame window or the frames of a video; `write_video`
writes those as a GIF or an mp4.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import imageio.v3 as iio
import numpy as np
import torch

from agents.config.a2c_config import A2CConfig
from agents.runtime.actors import LocalEnvs
from agents.runtime.checkpoint import CheckpointError, load_checkpoint
from agents.model.policy import Policy
from agents.learners.rollout import Actor
from agents.learners.ppo import PPOTrainer
from agents.runtime.seeding import env_seeds, seed_everything
from agents.learners.train import Trainer, build_policy, config_from_checkpoint
from envs.any_env import render_modes

CONFIGS = {trainer.kind: trainer.config_class for trainer in (Trainer, PPOTrainer)}  # checkpoint kind -> its config

VIDEO_FORMATS = (".gif", ".mp4")
DEFAULT_FPS = 30  # for envs whose metadata gives no render_fps


@dataclass
class Run:
    """A trained agent as its checkpoint describes it."""

    config: A2CConfig
    policy: Policy  # in eval mode, on the device it was loaded to
    global_step: int  # env frames it was trained for

    @property
    def device(self) -> torch.device:
        return next(self.policy.parameters()).device


def load_run(run_dir_or_file: str, device: torch.device, env_modules: Collection[str] = ()) -> Run:
    """The policy of an A2C or PPO checkpoint (a run folder or the file), on `device`;
    CheckpointError for anything that is not one this version can rebuild. Nothing in the file
    runs (agents/runtime/checkpoint.py), and a `module:EnvId` env imports its module only if it is a
    known env package or in `env_modules` (envs.check_env_import)."""
    payload = load_checkpoint(run_dir_or_file, tuple(CONFIGS), map_location=device)
    config = config_from_checkpoint(CONFIGS[payload["kind"]], payload, env_modules, device=str(device))
    policy = new_policy(config).to(device)
    try:
        policy.load_state_dict(payload["policy"])
        global_step = int(payload["counters"]["global_step"])
    except (RuntimeError, KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"checkpoint does not fit this model: {error}") from error
    return Run(config, policy.eval(), global_step)


def new_policy(config: A2CConfig) -> Policy:
    """A freshly initialised policy for `config`'s env and core (torch's generator as it stands),
    its observation and action spaces read from one env of that config."""
    probe = LocalEnvs(config.env, evaluation_seeds(config.seed, 1), config.env_options)
    probe.close()
    return build_policy(config, probe.observation_space, probe.num_actions)


def evaluation_seeds(seed: int, num_envs: int) -> list[int]:
    """The reset seeds of evaluation envs 0 .. num_envs - 1 under `seed`: never a training run's."""
    return env_seeds(seed, range(num_envs), "evaluation")


def evaluate(run: Run, episodes: int, seed: int, num_envs: int, greedy: bool) -> dict[str, np.ndarray]:
    """(episodes,) arrays of return, length and the env's metrics; env i draws evaluation stream
    i of `seed` and gives its first `episodes // num_envs` episodes (one more for the first
    remainder envs).

    Sampled actions draw from torch's global generator, seeded here, so a seed fixes the result
    in both modes.
    """
    if episodes < 1 or num_envs < 1:
        raise ValueError(f"episodes and num_envs must be >= 1, got {episodes} and {num_envs}")
    seed_everything(seed)
    pool = LocalEnvs(run.config.env, evaluation_seeds(seed, num_envs), run.config.env_options)
    try:
        actor = Actor(pool, run.policy, run.device)
        quota = np.full(num_envs, episodes // num_envs) + (np.arange(num_envs) < episodes % num_envs)
        results: dict[str, list[float]] = {}
        while quota.sum() > 0:
            record, ended = actor.step(greedy)
            # `ended` lists the envs that ended on this step in index order
            for k, i in enumerate(np.flatnonzero(record["terminated"] | record["truncated"])):
                if quota[i] > 0:
                    for key, values in ended.values.items():
                        results.setdefault(key, []).append(values[k])
                    quota[i] -= 1
    finally:
        pool.close()
    return {key: np.asarray(values, dtype=np.float64) for key, values in results.items()}


def check_render_mode(config: A2CConfig, render_mode: str) -> None:
    """A ValueError naming the env's render modes unless `render_mode` is one of them."""
    modes = render_modes(config.env, **config.env_options)
    if render_mode not in modes:
        raise ValueError(f"env {config.env!r} cannot render in {render_mode!r} mode; its render modes are {modes}")


def render_episodes(run: Run, episodes: int, seed: int, greedy: bool, render_mode: str) -> tuple[list[np.ndarray], list[float], int]:
    """Run one env (seeded as env 0 of `evaluate` with `seed`) for `episodes` episodes in
    `render_mode`: "human" draws a pygame window as it goes, "rgb_array" collects (H, W, 3)
    frames, one after the reset and one after every step, drawn by the env's own renderer.
    Returns the frames (empty in human mode), the episode returns and the env's frames per
    second. An env without `render_mode` among its render modes is a ValueError naming them."""
    check_render_mode(run.config, render_mode)
    seed_everything(seed)
    pool = LocalEnvs(run.config.env, evaluation_seeds(seed, 1), {**run.config.env_options, "render_mode": render_mode})
    try:
        actor = Actor(pool, run.policy, run.device)
        frames: list[np.ndarray] = []
        returns: list[float] = []
        while True:
            if render_mode == "rgb_array":
                frame = pool.env.render()  # ours: (H, W, 3); gymnasium's sync vector env: a tuple of one
                frames.append(frame[0] if isinstance(frame, (tuple, list)) else frame)
            if len(returns) == episodes:
                return frames, returns, int(pool.env.metadata.get("render_fps", DEFAULT_FPS))
            _, ended = actor.step(greedy)
            returns.extend(ended.values["return"])
    finally:
        pool.close()


def video_format_problem(path: str) -> str | None:
    """Why `path` cannot be written as a video (its extension, or a missing package), or None."""
    suffix = Path(path).suffix.lower()
    if suffix not in VIDEO_FORMATS:
        return f"unsupported video format {suffix or '(none)'!r} in {path!r}; use one of {list(VIDEO_FORMATS)}"
    if suffix == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
        return f"writing {path!r} needs the imageio-ffmpeg package (pip install imageio-ffmpeg), or write a .gif"
    return None


def write_video(path: str, frames: list[np.ndarray], fps: int) -> None:
    """Write (H, W, 3) frames as a looping GIF or an H.264 mp4 at `fps` frames per second."""
    problem = video_format_problem(path)
    if problem:
        raise ValueError(problem)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if Path(path).suffix.lower() == ".gif":
        iio.imwrite(path, np.stack(frames), duration=1000 / fps, loop=0)
    else:
        iio.imwrite(path, np.stack(frames), plugin="FFMPEG", fps=fps, codec="libx264")


def summary_json(results: dict[str, np.ndarray]) -> dict[str, Any]:
    """{quantity: {"mean": m, "std": s}} with plain floats, for the JSON results line."""
    return {key: {"mean": float(values.mean()), "std": float(values.std())} for key, values in results.items()}
