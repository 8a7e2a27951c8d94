"""Judging a trained A2C agent: its episodes' returns and metrics, and rendered episodes.

`load_run` rebuilds the policy from a checkpoint alone (the checkpoint carries its config).
`evaluate` plays its episodes on evaluation streams (agents/learners/play.py: the trainer's
Actor, memory carried and forgotten as in training, a fixed quota of episodes per env); not
greedy, an A2C or PPO policy samples its actions and a DQN acts epsilon-greedy at the epsilon
it last trained with (or one given).
`render_episodes` runs one env (seeded like env 0 of
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
from agents.config.dqn_config import DQNConfig
from agents.runtime.actors import LocalEnvs
from agents.runtime.checkpoint import CheckpointError, load_checkpoint
from agents.runtime.checkpoint_fields import check_counters, check_finite_weights
from agents.runtime.memory_budget import check_model_fits
from agents.model.policy import Policy
from agents.learners.play import evaluation_seeds, play_episodes, playing_actor
from agents.learners.ppo import PPOTrainer
from agents.learners.dqn.epsilon import epsilon as scheduled_epsilon
from agents.learners.dqn.trainer import DQNTrainer
from agents.runtime.seeding import seed_everything
from agents.learners.train import Trainer, build_policy, config_from_checkpoint
from envs.any_env import render_modes

CONFIGS = {trainer.kind: trainer.config_class for trainer in (Trainer, PPOTrainer, DQNTrainer)}  # checkpoint kind -> its config

VIDEO_FORMATS = (".gif", ".mp4")
DEFAULT_FPS = 30  # for envs whose metadata gives no render_fps


@dataclass
class Run:
    """A trained agent as its checkpoint describes it."""

    config: A2CConfig
    policy: Policy  # in eval mode, on the device it was loaded to
    global_step: int  # env frames it was trained for
    epsilon: float | None = None  # a DQN's: what it acts with when not greedy; None: sample from the policy

    @property
    def device(self) -> torch.device:
        return next(self.policy.parameters()).device


def load_run(run_dir_or_file: str, device: torch.device, env_modules: Collection[str] = ()) -> Run:
    """The policy of an A2C, PPO or DQN checkpoint (a run folder or the file), on `device` (a DQN's
    Q head stands where the logits do: --greedy takes the action of highest Q);
    CheckpointError for anything that is not one this version can rebuild. Nothing in the file
    runs (agents/runtime/checkpoint.py), and a `module:EnvId` env imports its module only if it is a
    known env package or in `env_modules` (envs.check_env_import)."""
    payload = load_checkpoint(run_dir_or_file, tuple(CONFIGS), map_location=device)
    config = config_from_checkpoint(CONFIGS[payload["kind"]], payload, env_modules, device=str(device))
    probe = env_probe(config)
    policy = new_policy(config, probe).to(device)
    try:
        policy.load_state_dict(payload["policy"])
    except (RuntimeError, KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"checkpoint does not fit this model: {error}") from error
    check_finite_weights("policy", payload["policy"])
    global_step = check_counters(payload.get("counters"), ("global_step",))["global_step"]
    return Run(config, policy.eval(), global_step, last_epsilon(config, global_step, probe.longest_episode))


def env_probe(config: A2CConfig) -> LocalEnvs:
    """One env of `config`, made and closed: its spaces and longest episode, nothing stepped."""
    probe = LocalEnvs(config.env, evaluation_seeds(config.seed, 1), config.env_options)
    probe.close()
    return probe


def last_epsilon(config: A2CConfig, global_step: int, longest_episode: int | None) -> float | None:
    """The epsilon a DQN run acted with at its last frame, `global_step` (its schedule's value
    there, agents/learners/dqn/epsilon.py; `longest_episode`: its env's, env_probe's); None for
    an A2C or PPO run, which samples from its policy."""
    if not isinstance(config, DQNConfig):
        return None
    return scheduled_epsilon(config.epsilon_schedule, global_step, config.total_steps, config.epsilon_start, config.epsilon_end,
                             config.epsilon_fraction, longest_episode)


def new_policy(config: A2CConfig, probe: LocalEnvs | None = None) -> Policy:
    """A freshly initialised policy for `config`'s env and core (torch's generator as it stands),
    its observation and action spaces read from one env of that config (`probe`, or a new one)."""
    probe = env_probe(config) if probe is None else probe
    build = lambda: build_policy(config, probe.observation_space, probe.num_actions)  # noqa: E731
    check_model_fits(build, f"the checkpoint's {config.core} policy", "it cannot be evaluated on this machine")
    return build()


def evaluate(run: Run, episodes: int, seed: int, num_envs: int, greedy: bool) -> dict[str, np.ndarray]:
    """(episodes,) arrays of return, length and the env's metrics of `run`'s policy on evaluation
    streams of `seed` (agents/learners/play.py:play_episodes); not greedy, a DQN acts
    epsilon-greedy at `run.epsilon`."""
    return play_episodes(run.policy, run.device, run.config.env, run.config.env_options, episodes, seed, num_envs, greedy,
                         run.epsilon)


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
        actor = playing_actor(pool, run.policy, run.device, run.epsilon)
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
