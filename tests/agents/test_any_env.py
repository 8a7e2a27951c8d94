"""Gymnasium's own envs through the trainer: Box (CartPole), Discrete (FrozenLake) and Tuple
(Blackjack) observations train, and so do pixels (a small image env of our own); presets fall
back to the defaults; a CartPole run resumes exactly (running normalisation included), steps
alike in worker processes, and evaluates beside the random policy only, with a video from the
env's own renderer; unsupported spaces exit 2."""

import os

os.environ["SDL_VIDEODRIVER"] = "dummy"
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import json

import gymnasium as gym
import imageio.v3 as iio
import numpy as np
import pytest
import torch

import evaluate
import train_a2c
from agents.config.a2c_config import A2CConfig, resolve_config
from agents.runtime.checkpoint import load_checkpoint
from agents.model.encoders.image import ImageEncoder
from agents.learners.train import Trainer
from tests.trained import assert_same_parameters, trained_parameters

TINY = ["--core", "lstm", "--core-opt", "hidden_size=8", "--num-envs", "4", "--rollout", "8", "--threads", "1"]


def small_config(run_dir, env="CartPole-v1", updates=3, **fields):
    return resolve_config({"env": env, "core": "lstm", "core_options": {"hidden_size": 8}, "num_envs": 4, "rollout": 8,
                           "total_steps": updates * 32, "seed": 2, "threads": 1, "run_dir": str(run_dir), **fields})


@pytest.mark.parametrize("env", ["CartPole-v1", "FrozenLake-v1", "Blackjack-v1"])
def test_gymnasium_classics_train_from_the_command_line(env, tmp_path):
    train_a2c.main(["--env", env, *TINY, "--total-steps", "64", "--run-dir", str(tmp_path)])
    payload = load_checkpoint(tmp_path, "a2c")
    assert payload["counters"]["updates"] == 2 and payload["config"]["env"] == env


def test_presets_fall_back_to_the_defaults_for_other_envs():
    for preset in ("paper", "cpu"):
        config = resolve_config({"env": "CartPole-v1", "core": "feedback", "preset": preset})
        assert config.run_dir.startswith("runs/CartPole-v1-feedback-")
    paper = resolve_config({"env": "CartPole-v1", "core": "feedback", "preset": "paper", "run_dir": "x"})
    assert (paper.num_envs, paper.rollout, paper.learning_rate, paper.core_options) == (A2CConfig.num_envs, A2CConfig.rollout, A2CConfig.learning_rate, {})
    cpu = resolve_config({"env": "minigrid:MiniGrid-MemoryS7-v0", "core": "lstm", "preset": "cpu"})
    assert cpu.core_options == {"hidden_size": 128, "n_layers": 1} and cpu.run_dir.startswith("runs/minigrid-MiniGrid-MemoryS7-v0-lstm-")


def test_a_foreign_env_resumes_with_fresh_episodes_and_its_running_normalisation(tmp_path):
    # Another env's state is arbitrary Python, which a checkpoint does not hold (it would be code
    # to run on loading): the checkpoint keeps the weights, optimiser and the encoder's running
    # statistics, and the resumed run starts fresh episodes, saying so.
    saved = trained_parameters(small_config(tmp_path, updates=3))
    assert load_checkpoint(tmp_path, "a2c")["envs"] is None
    resumed = Trainer.from_checkpoint(str(tmp_path), {"total_steps": 6 * 32})
    try:
        assert resumed.resumed_how == "clean episode restart: 'CartPole-v1' is not one of the suite's envs, whose state a checkpoint holds"
        assert_same_parameters(saved, resumed.policy.state_dict())
        resumed.train()
    finally:
        resumed.close()
    count = resumed.policy.state_dict()["encoder.norm.count"]
    assert count > saved["encoder.norm.count"] > 0


@pytest.mark.parametrize("env", ["CartPole-v1", "Blackjack-v1"])
def test_actor_workers_hold_any_space_and_train_as_in_process(env, tmp_path):
    local = trained_parameters(small_config(tmp_path / "local", env))
    workers = trained_parameters(small_config(tmp_path / "workers", env, num_actors=2))
    assert_same_parameters(local, workers)


def test_evaluation_shows_the_random_baseline_and_records_the_envs_frames(tmp_path, capsys):
    trained_parameters(small_config(tmp_path, updates=2))
    video = tmp_path / "cartpole.gif"
    evaluate.main([str(tmp_path), "--episodes", "3", "--video", str(video), "--video-episodes", "1"])
    results = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["results"]
    assert sorted(results) == ["agent", "random"] and set(results["agent"]) == {"return", "length"}
    reference = gym.make("CartPole-v1", render_mode="rgb_array")
    reference.reset(seed=0)
    frames = iio.imread(video)  # (frames, H, W, 3)
    assert frames.shape[0] > 1 and frames.shape[1:] == reference.render().shape


class PixelCueEnv(gym.Env):
    """A 7 x 5 RGB image, all red or all blue, says which of two actions is rewarded; an episode
    is one step."""

    observation_space = gym.spaces.Box(0, 255, (7, 5, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cue = int(self.np_random.integers(2))
        image = np.zeros(self.observation_space.shape, dtype=np.uint8)
        image[..., 2 * self.cue] = 255  # red or blue
        return image, {}

    def step(self, action):
        return np.zeros(self.observation_space.shape, dtype=np.uint8), float(action == self.cue), True, False, {}


gym.register("TestOnly/PixelCue-v0", entry_point=PixelCueEnv)


def test_an_image_env_trains_its_cnn_end_to_end(tmp_path):
    """Pixels through the whole loop: flattened by the env pool, stored in the rollout, encoded
    by the CNN, and its first convolution changed by the update (a CNN cut off from the loss, or
    pixels the pool cannot hold, would not get there)."""
    trainer = Trainer(small_config(tmp_path, "TestOnly/PixelCue-v0", updates=3))
    try:
        assert isinstance(trainer.policy.encoder, ImageEncoder)
        first_conv = trainer.policy.encoder.net[0].weight.detach().clone()
        trainer.train()
    finally:
        trainer.close()
    assert trainer.updates == 3
    assert not torch.equal(trainer.policy.encoder.net[0].weight, first_conv)


def test_pixels_cross_to_the_device_as_bytes_in_one_copy_a_step(tmp_path):
    """The rollout's observations are uint8 as the env gave them (float32 would be 4 times the
    bytes), and what crossed to the device is one staged copy a step plus one for the rewards
    and ends, each part padded to 8 bytes: B = 4 envs, T = 8 steps, 7 x 5 x 3 = 105 pixels."""
    trainer = Trainer(small_config(tmp_path, "TestOnly/PixelCue-v0", updates=1))
    try:
        rollout, _ = trainer.actor.collect(8)
        moved = trainer.actor.staging.bytes_to_device
    finally:
        trainer.close()
    assert rollout.inputs.obs.dtype == torch.uint8 and rollout.inputs.obs.shape == (9, 4, 105)
    pad = lambda size: -(-size // 8) * 8  # noqa: E731
    a_step = pad(4 * 105) + pad(4 * 8) + pad(4 * 4) + pad(4 * 1) + pad(4 * 1)  # obs, prev_action, prev_reward, first, valid
    ends = pad(8 * 4 * 4) + pad(8 * 4) + pad(8 * 4)  # reward (float32), terminated, truncated of all steps
    assert moved == 9 * a_step + ends  # T steps and the observation after them
    assert trainer.actor.bytes_to_host == 8 * 4 * 8  # the actions read back, int64


class MultiBinaryEnv(gym.Env):
    """An env whose observations the agent cannot read."""

    observation_space = gym.spaces.MultiBinary(3)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, dtype=np.int8), {}

    def step(self, action):
        return np.zeros(3, dtype=np.int8), 0.0, True, False, {}


gym.register("TestOnly/MultiBinaryObs-v0", entry_point=MultiBinaryEnv)


@pytest.mark.parametrize(
    "env, named",
    [
        ("TestOnly/MultiBinaryObs-v0", "observation space MultiBinary(3) is not supported; supported: Discrete, MultiDiscrete"),
        ("MountainCarContinuous-v0", "action space Box(-1.0, 1.0, (1,), float32) is not supported; supported: Discrete"),
        ("NoSuchEnv-v9", "unknown env 'NoSuchEnv-v9'"),
        ("no_such_module:CartPole-v1", "cannot import module 'no_such_module'"),
    ],
)
def test_unsupported_envs_exit_2_naming_the_space(env, named, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_a2c.main(["--env", env, *TINY, "--run-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err
