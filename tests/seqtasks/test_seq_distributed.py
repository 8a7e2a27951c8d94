"""python -m seqtasks under torchrun (CPU, gloo): two ranks, each on half of the batch's rows,
train exactly as one process on the whole batch, and resume."""

import json

import pytest
import torch

from agents.checkpoint import load_checkpoint
from seqtasks.__main__ import main
from seqtasks.config import resolve_config
from seqtasks.sequences import SequenceRegime
from seqtasks.splits import make_splits
from seqtasks.tasks import make_task
from seqtasks.train import KIND
from tests.launch import torchrun

# The LSTM (no attention key bias, whose zero gradient Adam would turn from float noise into
# steps: see tests/agents/test_distributed.py) on a token stream split by rows, stopped after 3
# updates and resumed to 6 (mid-epoch, memory carried).
FLAGS = ["--task=random_walk", "--grid-size=3", "--walk-length=8", "--batch-size=4", "--bptt=8", "--core=lstm", "--d-model=16",
         "--n-train=64", "--n-valid=16", "--n-test=16", "--lr=1e-3", "--eval-every=3", "--threads=1", "--no-progress", "--preset=cpu"]


def test_two_ranks_train_and_resume_as_one_process(tmp_path):
    one = main([*FLAGS, "--max-updates=6", f"--run-dir={tmp_path / 'one'}"])
    two = tmp_path / "two"
    first = torchrun(2, "-m", "seqtasks", *FLAGS, "--max-updates=3", f"--run-dir={two}")
    assert first.returncode == 0, first.stderr[-3000:]
    assert load_checkpoint(two, KIND)["world_size"] == 2
    resumed = torchrun(2, "-m", "seqtasks", "--resume", str(two), "--max-updates=6", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    saved, straight = load_checkpoint(two, KIND)["model"], load_checkpoint(tmp_path / "one", KIND)["model"]
    for key in straight:  # tolerances as in tests/agents/test_distributed.py
        torch.testing.assert_close(saved[key], straight[key], rtol=1e-5, atol=1e-6, msg=key)
    results = json.loads(resumed.stdout.strip().splitlines()[-1])  # rank 0 alone prints them, last
    assert [h["update"] for h in results["history"]] == [h["update"] for h in one["history"]] == [3, 6]
    assert results["test"]["accuracy"] == pytest.approx(one["test"]["accuracy"], abs=1e-9)


def test_ranks_share_the_sequences_of_each_batch(monkeypatch):
    """Batches of whole sequences (adding): the ranks' rows of a batch are the batch, in order
    (the loss weighting is the trainer's, tested above on the stream)."""
    config, _ = resolve_config({"task": "adding", "seq_length": 12, "batch_size": 8, "n_train": 40, "n_valid": 8, "n_test": 8}, cuda=False)
    splits = make_splits(make_task("adding", config), {"train": 40, "valid": 8, "test": 8}, config.seed)
    chosen, original = [], SequenceRegime._tensors
    monkeypatch.setattr(SequenceRegime, "_tensors", lambda self, split, rows: chosen.append(rows) or original(self, split, rows))
    model = lambda x, lengths: torch.zeros(len(lengths))  # noqa: E731  (predicts 0 for every sequence)
    regimes = [SequenceRegime(config, splits, torch.device("cpu"), rows) for rows in (slice(None), slice(0, 4), slice(4, 8))]
    for _ in range(6):  # past an epoch's end (5 batches of 8 in 40)
        chosen.clear()
        for regime in regimes:
            regime.train_loss(model)
        whole, first, second = chosen
        assert whole.tolist() == first.tolist() + second.tolist()
