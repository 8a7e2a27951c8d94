"""Evaluation and rendering of a trained agent: episode quotas, memory reset at episode starts
(against a hand-written loop), reproducibility, the GIF and the JSON line, bad input ending in a
clear error (exit code 2), and the reward-curve reader, smoother and chart."""

import os

os.environ["SDL_VIDEODRIVER"] = "dummy"  # before pygame is imported
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import json

import gymnasium as gym
import imageio.v3 as iio
import numpy as np
import pytest
import torch
from torch.utils.tensorboard import SummaryWriter

import envs
from agents import evaluation
from agents.model.step_inputs import StepInputs
from agents.config.a2c_config import resolve_config
from agents.runtime.checkpoint import save_checkpoint
from agents.evaluation import evaluate, evaluation_seeds, load_run, render_episodes, video_format_problem
from agents.plot_curves import draw, read_scalars, smooth
from agents.learners.train import Trainer
from evaluate import main

ENV_OPTIONS = {"length": 4, "max_episode_steps": 12}  # short episodes keep the tests fast


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A corridor LSTM agent trained for a few updates."""
    path = tmp_path_factory.mktemp("run")
    trainer = Trainer(resolve_config({
        "env": "corridor", "core": "lstm", "total_steps": 2048, "num_envs": 8, "rollout": 8, "run_dir": str(path),
        "core_options": {"hidden_size": 8}, "env_options": ENV_OPTIONS,
    }))
    trainer.train()
    trainer.close()
    return path


@pytest.fixture(scope="module")
def run(run_dir):
    return load_run(str(run_dir), torch.device("cpu"))


def hand_loop(run, episodes, seed):
    """Greedy episodes of one env reset with `seed`, written out step by step, independently of
    the Actor, the core starting each episode from a fresh initial state. (return, length) pairs."""
    env = gym.make_vec(envs.env_id(run.config.env), num_envs=1, autoreset_mode="SameStep", **run.config.env_options)
    obs, _ = env.reset(seed=seed)
    results = []
    with torch.no_grad():
        for _ in range(episodes):
            state, first = run.policy.initial_state(1, "cpu"), True
            prev_action, prev_reward, total, length, done = run.policy.num_actions, 0.0, 0.0, 0, False
            while not done:
                inputs = StepInputs(torch.as_tensor(obs)[None], torch.tensor([[prev_action]]), torch.tensor([[prev_reward]]),
                                    torch.tensor([[first]]))
                logits, _, state = run.policy(inputs, state)
                prev_action = int(logits[0, 0].argmax())
                obs, reward, terminated, truncated, _ = env.step(np.array([prev_action]))
                prev_reward, first = float(reward[0]), False
                total, length, done = total + prev_reward, length + 1, bool(terminated[0] or truncated[0])
            results.append((total, length))
    env.close()
    return results


def test_evaluation_matches_a_hand_loop_that_resets_memory_each_episode(run, monkeypatch):
    firsts = []  # the `first` flag the policy is given at each step: where the core forgets
    forward = run.policy.forward
    monkeypatch.setattr(run.policy, "forward", lambda inputs, state: firsts.append(bool(inputs.first)) or forward(inputs, state))
    results = evaluate(run, episodes=20, seed=1, num_envs=1, greedy=True)
    monkeypatch.undo()
    pairs = list(zip(results["return"], results["length"]))
    assert pairs == hand_loop(run, episodes=20, seed=evaluation_seeds(1, 1)[0])
    # Memory is cut at every episode's first step and nowhere else. Under NEXT_STEP autoreset an
    # ended episode's last observation takes one step of its own, so episode k + 1 begins
    # length_k + 1 steps after episode k.
    starts = np.cumsum([0] + [int(length) + 1 for length in results["length"][:-1]])
    assert [t for t, first in enumerate(firsts) if first] == starts.tolist()


def test_each_env_gives_a_quota_of_its_first_episodes(run):
    results = evaluate(run, episodes=6, seed=3, num_envs=4, greedy=True)
    assert sorted(results) == ["arrived", "length", "return", "success"]
    assert all(len(values) == 6 for values in results.values())
    quotas = [2, 2, 1, 1]  # the first 6 % 4 envs give one more
    alone = [hand_loop(run, q, seed) for q, seed in zip(quotas, evaluation_seeds(3, 4))]
    assert sorted(zip(results["return"], results["length"])) == sorted(p for pairs in alone for p in pairs)


@pytest.mark.parametrize("greedy", [True, False])
def test_evaluation_is_reproducible_from_the_seed(run, greedy):
    first = evaluate(run, episodes=8, seed=5, num_envs=4, greedy=greedy)
    second = evaluate(run, episodes=8, seed=5, num_envs=4, greedy=greedy)
    for key in first:
        np.testing.assert_array_equal(first[key], second[key], err_msg=key)


def test_rendered_episodes_have_one_frame_after_the_reset_and_each_step(run):
    frames, returns, fps = render_episodes(run, episodes=2, seed=0, greedy=True, render_mode="rgb_array")
    lengths = evaluate(run, episodes=2, seed=0, num_envs=1, greedy=True)["length"]
    # NEXT_STEP autoreset: each episode but the first begins with one reset step
    assert len(frames) == 1 + lengths.sum() + 1 and len(returns) == 2 and fps == 8
    human_frames, human_returns, _ = render_episodes(run, episodes=1, seed=0, greedy=True, render_mode="human")
    assert human_frames == [] and human_returns == returns[:1]


def test_command_line_writes_a_gif_and_one_json_line(run_dir, tmp_path, capsys):
    out = tmp_path / "agent.gif"
    main([str(run_dir), "--episodes", "4", "--greedy", "--video", str(out), "--video-episodes", "1"])
    lines = capsys.readouterr().out.strip().splitlines()
    results = json.loads(lines[-1])["results"]
    assert sorted(results) == ["agent", "oracle", "random"]
    assert results["oracle"]["success"] == {"mean": 1.0, "std": 0.0}
    assert set(results["agent"]) == {"return", "length", "success", "arrived"}
    video = iio.imread(out)  # (frames, H, W, 3)
    reference = gym.make("FeedbackRL/Corridor-v0", render_mode="rgb_array", **ENV_OPTIONS)
    reference.reset(seed=0)
    assert video.shape[0] > 1 and video.shape[1:] == reference.render().shape


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--episodes", "0"], "got 0"),
        (["--render", "window"], "'window'"),
        (["--video", "out.avi"], "'.avi'"),
        (["--device", "tpu"], "'tpu'"),
        (["--seed", "-1"], "a seed is an integer >= 0, got -1"),
        (["--render", "human", "--video", "out.gif"], "--render human and --video cannot be combined"),
        (["--epsilon", "1.5"], "--epsilon must be in [0, 1], got 1.5"),
        (["--epsilon", "nan"], "--epsilon must be"),
        (["--epsilon", "0.1", "--greedy"], "--epsilon 0.1 and --greedy cannot be combined"),
        (["--epsilon", "0.1"], "is not a DQN run; its policy samples its actions"),
    ],
)
def test_bad_arguments_exit_2_naming_the_value(run_dir, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        main([str(run_dir), *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_checkpoints_exit_2_saying_what_is_wrong(tmp_path, capsys):
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "checkpoint.pt").write_bytes(b"\x00garbage" * 10)
    save_checkpoint(tmp_path / "seq.pt", "seqtasks", {})
    for path, message in [(tmp_path / "missing", "no checkpoint at"), (tmp_path / "corrupt", "corrupt"), (tmp_path / "seq.pt", "'seqtasks' checkpoint, expected 'a2c'")]:
        with pytest.raises(SystemExit) as exit_info:
            main([str(path)])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_mp4_without_imageio_ffmpeg_names_the_package(monkeypatch):
    monkeypatch.setattr(evaluation.importlib.util, "find_spec", lambda name: None)
    assert "imageio-ffmpeg" in video_format_problem("out.mp4")
    assert video_format_problem("out.gif") is None


def test_smoothing_matches_tensorboard_by_hand():
    # weight 0.5: ema 0.5, 1.25, 2.125 debiased by 1 - 0.5^n = 0.5, 0.75, 0.875
    np.testing.assert_allclose(smooth(np.array([1.0, 2.0, 3.0]), 0.5), [1.0, 5 / 3, 2.125 / 0.875])
    np.testing.assert_array_equal(smooth(np.array([1.0, np.nan, 3.0]), 0.0), [1.0, np.nan, 3.0])
    np.testing.assert_array_equal(smooth(np.full(4, 7.0), 0.9), np.full(4, 7.0))
    with pytest.raises(ValueError, match="got 1.0"):
        smooth(np.ones(2), 1.0)


@pytest.fixture
def logged_run(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    for step, value in [(10, 0.5), (20, 0.25), (30, 1.0)]:
        writer.add_scalar("charts/episodic_return", value, step)
    writer.close()
    return tmp_path


def test_read_scalars_gives_steps_and_values_and_names_missing_tags(logged_run):
    steps, values = read_scalars(str(logged_run), "charts/episodic_return")
    assert steps.tolist() == [10, 20, 30] and values.tolist() == [0.5, 0.25, 1.0]
    with pytest.raises(ValueError, match=r"no scalar 'charts/nope'; it has \['charts/episodic_return'\]"):
        read_scalars(str(logged_run), "charts/nope")


def test_draw_writes_a_png(logged_run, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "curve.png"
    draw({"run": read_scalars(str(logged_run), "charts/episodic_return")}, "charts/episodic_return", 0.6, str(out))
    assert iio.imread(out).shape[:2] == (450, 800)
