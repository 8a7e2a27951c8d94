"""A non-finite loss or gradient stops training before it is saved, naming the update, and the
last good checkpoint stays (A2C and seqtasks); the watch itself reads nothing back until asked."""

import math

import pytest
import torch

import agents.learners.train
import seqtasks.train
import train_a2c
from agents.runtime.checkpoint import load_checkpoint
from agents.runtime.finite_watch import FiniteWatch, NonFiniteError
from seqtasks.__main__ import main as seqtasks_main
from tests.agents.test_run_folder import FLAGS


def test_the_watch_keeps_the_first_non_finite_update():
    watch = FiniteWatch()
    watch.check("unused")  # nothing noted: nothing to say
    watch.note(1, [torch.tensor(0.5), torch.tensor([1.0, 2.0])])
    watch.check("unused")
    watch.note(2, [torch.tensor(0.5), torch.tensor([1.0, math.inf])])
    watch.note(3, [torch.tensor(math.nan)])
    with pytest.raises(NonFiniteError, match="at update 2; .*; the last good checkpoint is X"):
        watch.check("the last good checkpoint is X")


def test_the_watch_runs_on_the_meta_device_without_reading_back():
    watch = FiniteWatch()
    watch.note(1, [torch.empty((), device="meta"), torch.empty(3, device="meta")])
    assert watch.first_bad.device.type == "meta"


def poisoned_after(update: int, loss_fn):
    """`loss_fn` whose loss is NaN from update `update` on (counting its calls)."""
    calls = []

    def poisoned(*args, **kwargs):
        calls.append(None)
        loss, stats = loss_fn(*args, **kwargs)
        return (loss * math.nan if len(calls) >= update else loss), stats

    return poisoned


def test_a2c_stops_at_a_nan_loss_naming_the_update_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    train_a2c.main([*FLAGS, "--total-steps", "64", "--run-dir", str(tmp_path)])  # 2 updates, saved
    good = load_checkpoint(tmp_path, "a2c")
    monkeypatch.setattr(agents.learners.train, "a2c_loss", poisoned_after(2, agents.learners.train.a2c_loss))  # update 4 of the run
    with pytest.raises(SystemExit) as exit_info:
        train_a2c.main(["--resume", str(tmp_path), "--total-steps", "320"])
    message = str(exit_info.value.code)
    assert message.startswith("training stopped: the loss or the gradient was not finite (NaN or infinite) at update 4;")
    assert f"the last good checkpoint is {tmp_path / 'checkpoint.pt'}" in message
    kept = load_checkpoint(tmp_path, "a2c")
    assert kept["counters"] == good["counters"]
    assert all(torch.equal(kept["policy"][key], good["policy"][key]) for key in good["policy"])


def test_seqtasks_stops_at_a_nan_loss_and_saves_nothing_after_it(tmp_path, monkeypatch):
    flags = ["--task=random_walk", "--core=lstm", "--grid-size=3", "--walk-length=8", "--n-train=16", "--n-valid=8", "--n-test=8",
             "--d-model=8", "--batch-size=4", "--bptt=8", "--max-updates=6", "--eval-every=2", "--log-every=2", "--threads=1",
             "--no-progress", f"--run-dir={tmp_path}"]
    original = seqtasks.train.Run.step
    monkeypatch.setattr(seqtasks.train.Run, "step", lambda run: original(run) if run.update < 2 else poison(run, original))
    with pytest.raises(SystemExit) as exit_info:
        seqtasks_main(flags)
    assert "not finite (NaN or infinite) at update 3; training stopped without saving" in str(exit_info.value.code)
    assert "nothing was saved" in str(exit_info.value.code) and not (tmp_path / "checkpoint.pt").exists()


def poison(run, step):
    """One update whose weights, and so its loss, are NaN."""
    with torch.no_grad():
        next(run.model.parameters()).fill_(math.nan)
    return step(run)
