"""The Mamba core in the trainers: A2C and PPO from the command line, a resumed run making the
updates of one never stopped (its SSM state and convolution window carried in the checkpoint),
and evaluate.py scoring its checkpoint."""

import json

import pytest

import evaluate
import train_a2c
import train_ppo
from agents.config.a2c_config import A2CConfig, resolve_config
from agents.config.ppo_config import PPOConfig
from agents.learners.ppo import PPOTrainer
from agents.learners.train import Trainer
from tests.trained import assert_resume_makes_the_unstopped_updates

ENVS, STEPS = 8, 8  # rollouts of 8 steps over episodes of at most 7: episode starts inside every rollout
OPTIONS = "d_model=8,d_state=4,d_conv=3,n_layers=2"
ENV = ["--env", "corridor", "--env-opt", "length=3,max_episode_steps=7"]


@pytest.mark.parametrize("trainer", [train_a2c, train_ppo], ids=["a2c", "ppo"])
def test_the_command_line_trains_it_and_evaluate_scores_it(tmp_path, capsys, trainer):
    extra = ["--num-minibatches", "2"] if trainer is train_ppo else []
    trainer.main([*ENV, "--core", "mamba", "--core-opt", OPTIONS, "--num-envs", str(ENVS), "--rollout", str(STEPS),
                  "--total-steps", str(3 * ENVS * STEPS), "--threads", "1", "--run-dir", str(tmp_path), *extra])
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("core mamba: ") and all(option in line for option in OPTIONS.split(",")), line
    evaluate.main([str(tmp_path), "--episodes", "4", "--greedy"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["global_step"] == 3 * ENVS * STEPS and result["episodes"] == 4


@pytest.mark.parametrize("trainer_class, config_class", [(Trainer, A2CConfig), (PPOTrainer, PPOConfig)], ids=["a2c", "ppo"])
def test_a_resumed_run_makes_the_updates_of_an_unstopped_one(tmp_path, trainer_class, config_class):
    def config(folder, updates):
        return resolve_config(dict(env="corridor", core="mamba", num_envs=ENVS, rollout=STEPS, total_steps=updates * ENVS * STEPS,
                                   seed=5, run_dir=str(tmp_path / folder), threads=1, learning_rate=1e-2,
                                   core_options=dict(d_model=8, d_state=4, d_conv=3, n_layers=2),
                                   env_options={"length": 3, "max_episode_steps": 7}), config_class)

    assert_resume_makes_the_unstopped_updates(trainer_class, config, ENVS * STEPS)
