"""python -m seqtasks under torchrun (CPU, gloo): two ranks, each on half of the batch's rows,
train exactly as one process on the whole batch, resume, and resume a run saved by another
number of processes."""

import json

import pytest
import torch

from agents.runtime.checkpoint import load_checkpoint
from agents.config.config_cli import given_fields
from agents.runtime.distributed import World
from seqtasks.__main__ import build_parser, make_run
from seqtasks.config import SeqConfig, resolve_config
from seqtasks.sequences import SequenceRegime
from seqtasks.splits import make_splits
from seqtasks.streams import StreamRegime
from seqtasks.tasks import make_task
from seqtasks.train import KIND, Run
from tests.float32 import close32
from tests.launch import torchrun

# Counting (a run of 1-6 A's, then targets only at the queries after it) dealt into 4 token-stream
# rows: the episodes differ in length, so the two ranks' rows hold different numbers of targets in
# every block (test_the_ranks_hold_different_numbers_of_targets) and each rank's share of the
# loss is not 1/2. Plain SGD (Nesterov) without clipping or warm-up: a gradient scaled by a
# constant moves the weights by as much more, where Adam and the clip would cancel it. The LSTM,
# stopped after 3 updates and resumed to 6 (mid-epoch, memory carried).
FLAGS = ["--task=counting", "--max-count=6", "--batch-size=4", "--bptt=8", "--core=lstm", "--d-model=16", "--n-train=64",
         "--n-valid=16", "--n-test=16", "--optimizer=nesterov", "--lr=0.3", "--warmup=0", "--grad-clip=0", "--eval-every=3",
         "--threads=1", "--no-progress", "--preset=cpu"]
# The ranks' gradients differ from one process's only in the order of the sums (each rank's
# half, then the halves): a few float32 roundings per entry, carried through 6 updates. The
# updates (final - initial weights) are compared, not the weights, where an error of the step
# would hide in the initial values; they also hold the rounding of the weights themselves (eps
# times |w| <= 2.3 here). close32(terms=6), 1.8e-4 relative and absolute, is far above both (the
# difference seen is 3e-8) and far below a wrong weighting: a mean of per-rank means moves
# entries by 3e-4 to 1.5e-2, a dropped factor of the number of processes halves every update.
UPDATE_TOLERANCE = close32(terms=6)


def test_two_ranks_train_and_resume_as_one_process(tmp_path, capsys):
    """Two ranks make one process's updates, stopped and resumed: fails if a rank's loss is not
    weighted by its share of the batch's targets (a mean of per-rank means, a missing factor of
    the number of processes). Then a run resumed on another number of processes (2 -> 1, 1 -> 2)
    says that its carried memory restarts, once, and trains on."""
    parser = build_parser()
    one = make_run(parser.parse_args([*FLAGS, "--max-updates=6", f"--run-dir={tmp_path / 'one'}"]), parser, quiet=True)
    initial = {key: value.clone() for key, value in one.model.state_dict().items()}
    results_one = one.train(progress=False)
    two = tmp_path / "two"
    first = torchrun(2, "-m", "seqtasks", *FLAGS, "--max-updates=3", f"--run-dir={two}")
    assert first.returncode == 0, first.stderr[-3000:]
    assert load_checkpoint(two, KIND)["world_size"] == 2
    resumed = torchrun(2, "-m", "seqtasks", "--resume", str(two), "--max-updates=6", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "carried memory restarts" not in resumed.stderr  # the same number of processes: memory continues
    saved, straight = load_checkpoint(two, KIND)["model"], load_checkpoint(tmp_path / "one", KIND)["model"]
    assert saved.keys() == straight.keys()
    for key in straight:
        torch.testing.assert_close(saved[key] - initial[key], straight[key] - initial[key], **UPDATE_TOLERANCE,
                                   msg=lambda text, key=key: f"the update of {key}: {text}")
    results = json.loads(resumed.stdout.strip().splitlines()[-1])  # rank 0 alone prints them, last
    assert [h["update"] for h in results["history"]] == [h["update"] for h in results_one["history"]] == [3, 6]
    assert results["test"]["accuracy"] == pytest.approx(results_one["test"]["accuracy"], abs=1e-9)

    # Another number of processes continues weights, optimiser and counters, and restarts the
    # carried memory (its rows are other rows), saying so once: two saved, one now ...
    capsys.readouterr()
    alone = Run.resume(two, {"max_updates": 7})
    assert capsys.readouterr().err == "the carried memory restarts: the number of processes differs (2 saved, 1 now)\n"
    assert alone.regime.state is None and alone.train(progress=False)["updates"] == 7
    # ... and one saved, two now.
    spread = torchrun(2, "-m", "seqtasks", "--resume", str(tmp_path / "one"), "--max-updates=7", "--no-progress")
    assert spread.returncode == 0, spread.stderr[-3000:]
    assert spread.stderr.count("the carried memory restarts: the number of processes differs (1 saved, 2 now)") == 1
    saved = load_checkpoint(tmp_path / "one", KIND)
    assert saved["world_size"] == 2 and saved["counters"]["update"] == 7


class Blank:
    """A model without memory that predicts nothing in particular: enough to read a regime's blocks."""

    def initial_state(self, batch, device):
        return None

    def __call__(self, inputs, state, first):
        return torch.zeros(*inputs.shape, 2), state  # (T, B, V): counting's 2 output tokens


def test_the_ranks_hold_different_numbers_of_targets():
    """The premise of the comparison above: in each of its updates the two ranks' rows hold
    different numbers of targets. With equal counts (a fixed-length task) every share is 1/2, and
    a mean of per-rank means would pass it."""
    config, _ = resolve_config(given_fields(build_parser().parse_args(FLAGS), SeqConfig), cuda=False)
    splits = make_splits(make_task(config.task, config), {"train": config.n_train, "valid": config.n_valid, "test": config.n_test}, config.seed)
    ranks = [StreamRegime(config, splits, torch.device("cpu"), slice(*World(rank, 2).share(config.batch_size, "batch_size")))
             for rank in range(2)]
    for update in range(6):
        first, second = (regime.train_loss(Blank())[1] for regime in ranks)
        assert first != second, f"update {update + 1}: both ranks hold {first} targets"


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
