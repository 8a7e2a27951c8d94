"""Our envs in another library's trainer: stable-baselines3's env checker accepts each of them,
and sb3-contrib's RecurrentPPO trains on each (its README snippet, run for a few updates).

With torch >= 2.13 sb3's flatten extractor must report a Python int width for a MultiDiscrete
space (experiments/peer_sb3.py: IntFlattenExtractor), as the README snippet says."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs

pytest.importorskip("sb3_contrib")
from sb3_contrib import RecurrentPPO  # noqa: E402
from stable_baselines3.common.env_checker import check_env  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

from experiments.peer_sb3 import IntFlattenExtractor  # noqa: E402


@pytest.mark.parametrize("name", sorted(envs.ENV_IDS))
def test_sb3_checks_and_recurrent_ppo_trains_on_each_env(name):
    check_env(gym.make(envs.ENV_IDS[name]))  # raises on any API deviation
    vec = make_vec_env(envs.ENV_IDS[name], n_envs=2, seed=0)
    model = RecurrentPPO("MlpLstmPolicy", vec, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu",
                         policy_kwargs=dict(features_extractor_class=IntFlattenExtractor, lstm_hidden_size=16))
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=128)
    assert model.num_timesteps >= 128
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters()))  # it learned something
    obs, state = vec.reset(), None
    starts = np.ones(2, dtype=bool)
    for _ in range(5):  # acting with the LSTM state carried, as in sb3-contrib's docs
        actions, state = model.predict(obs, state=state, episode_start=starts, deterministic=True)
        obs, _, dones, _ = vec.step(actions)
        starts = dones
    assert vec.action_space.contains(int(actions[0]))
    vec.close()
