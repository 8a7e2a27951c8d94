"""MiniGrid's and POPGym's memory tasks through the command lines (the minigrid and popgym extras,
in the dev extra: these run in CI; skipped only where an extra is not installed): a short run,
with actor workers, resumed and evaluated."""

import os

os.environ["SDL_VIDEODRIVER"] = "dummy"
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import json

import imageio.v3 as iio
import pytest

import evaluate
import train_a2c
from agents.runtime.checkpoint import load_checkpoint

SMALL = ["--num-envs", "4", "--rollout", "8", "--threads", "1", "--seed", "1"]
FEEDBACK = ["--core", "feedback", "--core-opt", "d_model=16,n_layers=1,n_heads=2,span=8"]


def test_minigrid_memory_trains_resumes_and_evaluates(tmp_path, capsys):
    pytest.importorskip("minigrid")
    env = "minigrid:MiniGrid-MemoryS7-v0"
    short = ["--env-opt", "max_steps=20"]  # MiniGrid's own option: episodes of at most 20 steps keep the test short
    train_a2c.main(["--env", env, *short, *FEEDBACK, *SMALL, "--total-steps", "64", "--num-actors", "2", "--run-dir", str(tmp_path)])
    train_a2c.main(["--resume", str(tmp_path), "--total-steps", "128", "--num-actors", "0"])  # workers (module:EnvId imported in each) then none
    payload = load_checkpoint(tmp_path, "a2c")
    assert payload["counters"]["updates"] == 4 and "encoder.parts.image.embeds.0.weight" in payload["policy"]
    capsys.readouterr()
    video = tmp_path / "memory.gif"
    evaluate.main([str(tmp_path), "--episodes", "2", "--greedy", "--video", str(video), "--video-episodes", "1"])
    results = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["results"]
    assert sorted(results) == ["agent", "random"]
    assert iio.imread(video).shape[0] > 1


@pytest.mark.parametrize("env, renders", [("popgym:popgym-RepeatPreviousEasy-v0", False), ("popgym:popgym-PositionOnlyCartPoleEasy-v0", True)])
def test_popgym_envs_train_resume_and_evaluate(env, renders, tmp_path, capsys):
    """A Discrete and a Box observation; asking an env without rgb_array for a video is exit 2."""
    pytest.importorskip("popgym")
    train_a2c.main(["--env", env, "--core", "lstm", "--core-opt", "hidden_size=8", *SMALL, "--total-steps", "64", "--run-dir", str(tmp_path)])
    train_a2c.main(["--resume", str(tmp_path), "--total-steps", "96"])
    assert load_checkpoint(tmp_path, "a2c")["counters"]["updates"] == 3
    capsys.readouterr()
    evaluate.main([str(tmp_path), "--episodes", "2"])
    results = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["results"]
    assert sorted(results) == ["agent", "random"]
    if not renders:
        with pytest.raises(SystemExit) as exit_info:
            evaluate.main([str(tmp_path), "--episodes", "1", "--video", str(tmp_path / "x.gif")])
        assert exit_info.value.code == 2
        assert "cannot render in 'rgb_array' mode; its render modes are []" in capsys.readouterr().err
