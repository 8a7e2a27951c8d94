"""A run folder someone handed over can do nothing outside itself: a run.lock that is a link, a
folder or a pipe is refused without being followed, a --run-dir that cannot be a folder is refused
in one line, a new run deletes nothing it did not write (without --overwrite), and temporary files
a killed save left behind go at the next start."""

import os

import pytest

import train_a2c
from agents.runtime import run_folder
from agents.runtime.checkpoint import load_checkpoint
from seqtasks.__main__ import main as seqtasks_main
from tests.usage import refused

FLAGS = ["--env", "corridor", "--core", "lstm", "--core-opt", "hidden_size=8", "--env-opt", "length=3", "--env-opt", "max_episode_steps=7",
         "--num-envs", "4", "--rollout", "8", "--threads", "1", "--seed", "1"]
SEQ_FLAGS = ["--task=random_walk", "--core=lstm", "--grid-size=3", "--walk-length=8", "--n-train=16", "--n-valid=8", "--n-test=8",
             "--d-model=8", "--batch-size=4", "--bptt=8", "--max-updates=2", "--eval-every=2", "--threads=1", "--no-progress"]


def train(run_dir, *extra, frames=64):
    train_a2c.main([*FLAGS, "--total-steps", str(frames), "--run-dir", str(run_dir), *extra])


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlinked_run_lock_is_refused_and_writes_nothing_outside_the_folder(tmp_path, capsys, dangling):
    run = tmp_path / "run"
    train(run)
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_text("the victim's own words\n")
    (run / "run.lock").unlink()
    (run / "run.lock").symlink_to(victim)
    for argv in (["--resume", str(run)], [*FLAGS, "--run-dir", str(run), "--overwrite"]):
        err = refused(capsys, train_a2c.main, argv)
        assert "run.lock is a symbolic link" in err and len(err.strip().splitlines()[-1]) < 300
    assert victim.read_text() == "the victim's own words\n" if not dangling else not victim.exists()
    assert load_checkpoint(run, "a2c")["counters"]["global_step"] == 64  # the run is kept


def test_seqtasks_refuses_a_symlinked_run_lock_too(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("kept\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.lock").symlink_to(victim)
    assert "run.lock is a symbolic link" in refused(capsys, seqtasks_main, [*SEQ_FLAGS, "--run-dir", str(run)])
    assert victim.read_text() == "kept\n"


@pytest.mark.parametrize("kind", ["folder", "pipe", "hard link"])
def test_a_run_lock_that_is_not_a_regular_file_of_ours_is_refused(tmp_path, kind):
    lock = tmp_path / "run.lock"
    other = tmp_path.parent / f"{tmp_path.name}-other.txt"
    if kind == "folder":
        lock.mkdir()
    elif kind == "pipe":
        os.mkfifo(lock)
    else:
        other.write_text("another file\n")
        os.link(other, lock)
    with pytest.raises(run_folder.RunFolderError, match=f"run.lock is a {kind}"):
        run_folder.lock(tmp_path)
    if kind == "hard link":
        assert other.read_text() == "another file\n"


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_run_dir_that_cannot_be_a_folder_is_refused_in_one_line(tmp_path, capsys, where):
    (tmp_path / "file").write_text("not a folder\n")
    run = tmp_path / "file" if where == "a file" else tmp_path / "file" / "run"
    err = refused(capsys, train_a2c.main, [*FLAGS, "--run-dir", str(run)])
    assert f"--run-dir {run}" in err and "Traceback" not in err
    assert (tmp_path / "file").read_text() == "not a folder\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder")
def test_a_read_only_run_dir_is_refused_in_one_line(tmp_path, capsys):
    tmp_path.chmod(0o555)
    try:
        err = refused(capsys, train_a2c.main, [*FLAGS, "--run-dir", str(tmp_path / "run")])
    finally:
        tmp_path.chmod(0o755)
    assert "--run-dir" in err and "Traceback" not in err


def test_a_new_run_deletes_no_file_it_did_not_write_without_overwrite(tmp_path, capsys):
    foreign = tmp_path / "events.out.tfevents.1.another-tool"
    foreign.write_bytes(b"another tool's curves")
    (tmp_path / "notes.txt").write_text("mine\n")
    err = refused(capsys, train_a2c.main, [*FLAGS, "--total-steps", "64", "--run-dir", str(tmp_path)])
    assert "1 event files" in err and "--overwrite" in err
    assert foreign.read_bytes() == b"another tool's curves" and not (tmp_path / "checkpoint.pt").exists()
    train(tmp_path, "--overwrite")
    assert not foreign.exists() and (tmp_path / "notes.txt").read_text() == "mine\n"  # --overwrite: the curves go, nothing else


def test_temporary_files_of_a_killed_save_are_removed_at_the_next_start(tmp_path):
    train(tmp_path)
    ours = [tmp_path / ".checkpoint.pt.k1ll3d_x.tmp", tmp_path / ".config.json.abcd1234.tmp"]
    theirs = tmp_path / ".notes.txt.abcd1234.tmp"
    for path in [*ours, theirs]:
        path.write_bytes(b"torn")
    train_a2c.main(["--resume", str(tmp_path), "--total-steps", "96"])
    assert not any(path.exists() for path in ours) and theirs.exists()
    train(tmp_path, "--overwrite")  # and on a new run
    assert not any(path.exists() for path in ours)
