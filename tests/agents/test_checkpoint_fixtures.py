"""Checkpoints written by earlier versions, kept as files: a format-1 checkpoint (the pickled
format before 2026-11-27, written by that version of train_a2c.py) is refused, converts with
agents/convert_checkpoint.py and resumes to the weights that version's own resume reached; a
format-2 checkpoint resumes to the weights it did when it was written. Moving a module or changing
the format must keep these loading (issue 47 moves modules; checkpoints of format 2 name none).

Each fixture is a corridor run of 64 frames (4 envs, rollouts of 8), resumed here to 128; the
weights after that resume, from the version that wrote the fixture, lie beside it.
format2_lstm_episode_window (--bptt episode, written before the step inputs became one record,
agents/model/step_inputs.py) holds a gradient window with 4 stored steps: its saved layout, a list
[obs, prev_action, prev_reward, first], must keep loading into the window."""

import shutil
from pathlib import Path

import pytest
import torch

import evaluate
from agents import convert_checkpoint
from agents.runtime.checkpoint import CheckpointError, load_checkpoint
from agents.learners.train import Trainer
from tests.float32 import close32

FIXTURES = Path(__file__).parent.parent / "fixtures" / "checkpoints"


def resumed_weights(run_dir) -> dict:
    trainer = Trainer.from_checkpoint(str(run_dir), {"total_steps": 128})
    try:
        assert trainer.resumed_how.startswith("envs and memory continue")
        trainer.train()
    finally:
        trainer.close()
    return trainer.policy.state_dict()


def assert_close_weights(weights: dict, expected: dict) -> None:
    """Equal here; another CPU (AVX-512 or not) rounds float32 differently in the last bits, which
    8 updates of Adam at lr 1e-3 keep far below the 1e-3 a step that a wrong resume would move."""
    assert weights.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(weights[key], expected[key], **close32(terms=8), msg=key)


@pytest.mark.parametrize("core", ["lstm", "feedback"])
def test_a_format_1_checkpoint_is_refused_then_converts_and_resumes_as_its_version_did(tmp_path, core, capsys):
    run = shutil.copytree(FIXTURES / f"format1_{core}", tmp_path / "run")
    with pytest.raises(CheckpointError, match="convert_checkpoint --i-trust-this-file"):
        load_checkpoint(run, "a2c")
    convert_checkpoint.main([str(run), "--i-trust-this-file"])
    expected = torch.load(FIXTURES / f"format1_{core}_resumed_to_128.pt", weights_only=True)
    assert_close_weights(resumed_weights(run), expected)


def test_a_format_2_checkpoint_loads_evaluates_and_resumes_as_when_it_was_written(tmp_path, capsys):
    run = shutil.copytree(FIXTURES / "format2_feedback", tmp_path / "run")
    evaluate.main([str(run), "--episodes", "2"])
    assert '"core": "feedback"' in capsys.readouterr().out
    expected = torch.load(FIXTURES / "format2_feedback_resumed_to_128.pt", weights_only=True)
    assert_close_weights(resumed_weights(run), expected)


def test_a_format_2_gradient_window_resumes_as_when_it_was_written(tmp_path):
    run = shutil.copytree(FIXTURES / "format2_lstm_episode_window", tmp_path / "run")
    saved = load_checkpoint(run, "a2c")["window"]
    assert saved["episodes"] and [tuple(t.shape) for t in saved["inputs"]] == [(4, 4, 3), (4, 4), (4, 4), (4, 4)]
    expected = torch.load(FIXTURES / "format2_lstm_episode_window_resumed_to_128.pt", weights_only=True)
    assert_close_weights(resumed_weights(run), expected)
