"""python -m seqtasks under torchrun (CPU, gloo): two ranks, each on half of the batch's rows,
train exactly as one process on the whole batch, and resume."""

import json

import pytest
import torch

from agents.checkpoint import load_checkpoint
from seqtasks.__main__ import main
from seqtasks.train import KIND
from tests.launch import torchrun

# The LSTM (no attention key bias, whose zero gradient Adam would turn from float noise into
# steps: see tests/agents/test_distributed.py); both regimes: a token stream split by rows,
# batches of sequences split by sequences.
TASKS = {
    "stream": ["--task=random_walk", "--grid-size=3", "--walk-length=8", "--batch-size=4", "--bptt=8"],
    "sequences": ["--task=adding", "--seq-length=12", "--batch-size=8", "--optimizer=adam"],
}
COMMON = ["--core=lstm", "--d-model=16", "--n-train=64", "--n-valid=16", "--n-test=16", "--lr=1e-3", "--eval-every=3",
          "--threads=1", "--no-progress", "--preset=cpu"]


@pytest.mark.parametrize("regime", sorted(TASKS))
def test_two_ranks_train_as_one_process(tmp_path, regime):
    """The stream stops after 3 updates and resumes to 6 (mid-epoch, memory carried); the
    sequences run 6 updates straight (no memory to carry: one launch is enough)."""
    flags = [*TASKS[regime], *COMMON]
    one = main([*flags, "--max-updates=6", f"--run-dir={tmp_path / 'one'}"])
    two = tmp_path / "two"
    first = torchrun(2, "-m", "seqtasks", *flags, f"--max-updates={3 if regime == 'stream' else 6}", f"--run-dir={two}")
    assert first.returncode == 0, first.stderr[-3000:]
    last = first
    if regime == "stream":
        assert load_checkpoint(two, KIND)["world_size"] == 2
        last = torchrun(2, "-m", "seqtasks", "--resume", str(two), "--max-updates=6", "--no-progress")
        assert last.returncode == 0, last.stderr[-3000:]
    saved, straight = load_checkpoint(two, KIND)["model"], load_checkpoint(tmp_path / "one", KIND)["model"]
    for key in straight:  # tolerances as in tests/agents/test_distributed.py
        torch.testing.assert_close(saved[key], straight[key], rtol=1e-5, atol=1e-6, msg=key)
    results = json.loads(last.stdout.strip().splitlines()[-1])  # rank 0 alone prints them, last
    assert [h["update"] for h in results["history"]] == [h["update"] for h in one["history"]] == [3, 6]
    assert results["test"]["accuracy"] == pytest.approx(one["test"]["accuracy"], abs=1e-9)
