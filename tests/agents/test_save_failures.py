"""A disk that refuses a checkpoint (full, read-only) ends training with one line saying so, the
previous checkpoint whole and no temporary file left: no traceback, nothing lost."""

import errno
import os

import pytest

import train_a2c
from seqtasks.__main__ import main as seqtasks_main
from tests.agents.test_run_folder_safety import FLAGS, SEQ_FLAGS


def full_disk(monkeypatch):
    """fsync of a checkpoint reports the disk full, as it does when the written blocks find no room."""
    fsync = os.fsync

    def full(handle):
        if ".checkpoint.pt." in os.readlink(f"/proc/self/fd/{handle}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        fsync(handle)
    monkeypatch.setattr(os, "fsync", full)


@pytest.mark.parametrize("trainer", ["a2c", "seqtasks"])
def test_a_full_disk_while_saving_is_one_line_and_keeps_the_old_checkpoint(tmp_path, monkeypatch, capsys, trainer):
    if trainer == "a2c":
        first, again = [*FLAGS, "--total-steps", "64", "--run-dir", str(tmp_path)], ["--resume", str(tmp_path), "--total-steps", "96"]
        command = train_a2c.main
    else:
        first, again = [*SEQ_FLAGS, f"--run-dir={tmp_path}"], ["--resume", str(tmp_path), "--max-updates", "4"]
        command = seqtasks_main
    command(first)
    before = (tmp_path / "checkpoint.pt").read_bytes()
    capsys.readouterr()
    full_disk(monkeypatch)
    with pytest.raises(SystemExit) as stopped:
        command(again)
    message = str(stopped.value.code)
    assert "No space left on device" in message and "previous checkpoint is kept" in message and "\n" not in message
    assert (tmp_path / "checkpoint.pt").read_bytes() == before
    assert not list(tmp_path.glob(".checkpoint.pt.*.tmp"))
