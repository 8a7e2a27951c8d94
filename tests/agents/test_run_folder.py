"""A run folder belongs to one run: a new run is refused in a folder holding one (unless
--overwrite), a second trainer is refused while the first holds the folder's lock, and a folder
left by a run killed before its first checkpoint can take a new run (--overwrite deleting its curves)."""

import os
import signal
import subprocess
import sys
import threading

import pytest

import train_a2c
from agents.runtime import run_folder
from agents.runtime.checkpoint import load_checkpoint
from seqtasks.__main__ import main as seqtasks_main
from tests.usage import refused

FLAGS = ["--env", "corridor", "--core", "lstm", "--core-opt", "hidden_size=8", "--env-opt", "length=3", "--env-opt", "max_episode_steps=7",
         "--num-envs", "4", "--rollout", "8", "--threads", "1", "--seed", "1"]


def train(run_dir, *extra, frames=64):
    train_a2c.main([*FLAGS, "--total-steps", str(frames), "--run-dir", str(run_dir), *extra])


def events(run_dir):
    return sorted(run_dir.glob("events.out.tfevents.*"))


def test_a_new_run_is_refused_in_a_folder_holding_one_and_overwrite_starts_over(tmp_path, capsys):
    train(tmp_path)
    before = (tmp_path / "checkpoint.pt").read_bytes()
    err = refused(capsys, train_a2c.main, [*FLAGS, "--total-steps", "96", "--run-dir", str(tmp_path)])
    assert f"run folder '{tmp_path}' already holds a run (checkpoint.pt)" in err and f"--resume {tmp_path}" in err and "--overwrite" in err
    assert (tmp_path / "checkpoint.pt").read_bytes() == before and len(events(tmp_path)) == 1

    old_events = events(tmp_path)
    train(tmp_path, "--overwrite", frames=96)
    assert load_checkpoint(tmp_path, "a2c")["counters"]["global_step"] == 96
    assert len(events(tmp_path)) == 1 and events(tmp_path) != old_events
    assert "give one of them" in refused(capsys, train_a2c.main, ["--resume", str(tmp_path), "--overwrite"])


def test_a_folder_an_experiment_finished_is_refused_too(tmp_path, capsys):
    (tmp_path / "train.done.json").write_text('{"target": "64 frames"}\n')
    assert "already holds a run (train.done.json)" in refused(capsys, train_a2c.main, [*FLAGS, "--run-dir", str(tmp_path)])


def test_a_run_killed_before_its_first_checkpoint_leaves_a_folder_a_new_run_can_take(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{}\n")
    (tmp_path / "events.out.tfevents.1.killed").write_bytes(b"")
    assert "holds 1 event files" in refused(capsys, train_a2c.main, [*FLAGS, "--total-steps", "64", "--run-dir", str(tmp_path)])
    train(tmp_path, "--overwrite")  # the event files may be another tool's: deleted only when told
    assert [path.name for path in events(tmp_path)] != ["events.out.tfevents.1.killed"] and len(events(tmp_path)) == 1


def training_began(process: subprocess.Popen) -> tuple[threading.Event, list[str]]:
    """An event set once `process`'s progress bar shows on stderr (training has begun: a stop
    signal now saves), and the stderr read so far; stderr is drained throughout so the process
    never blocks on a full pipe."""
    began, seen = threading.Event(), []

    def drain():
        for chunk in iter(lambda: os.read(process.stderr.fileno(), 4096), b""):
            seen.append(chunk.decode(errors="replace"))
            if "%|" in "".join(seen):
                began.set()

    threading.Thread(target=drain, daemon=True).start()
    return began, seen


def test_a_second_trainer_is_refused_naming_the_first_ones_pid(tmp_path, capsys):
    first = subprocess.Popen([sys.executable, "train_a2c.py", *FLAGS, "--total-steps", "100000000", "--run-dir", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        began, seen = training_began(first)
        assert began.wait(timeout=120), "".join(seen)
        err = refused(capsys, train_a2c.main, [*FLAGS, "--run-dir", str(tmp_path)])
        assert f"is in use by another run (pid {first.pid})" in err
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=120) == 128 + signal.SIGTERM
        assert "--resume" in refused(capsys, train_a2c.main, [*FLAGS, "--run-dir", str(tmp_path)])
    finally:
        if first.poll() is None:
            first.kill()
        first.wait()
    # The lock went with the process: the run resumes.
    train_a2c.main(["--resume", str(tmp_path), "--total-steps", str(load_checkpoint(tmp_path, "a2c")["counters"]["global_step"] + 32)])


def test_a_lock_refuses_a_second_holder_until_released(tmp_path):
    held = run_folder.lock(tmp_path)
    with pytest.raises(run_folder.RunFolderError, match=f"pid {os.getpid()}"):
        run_folder.lock(tmp_path)
    held.release()
    run_folder.lock(tmp_path).release()


def test_seqtasks_refuses_a_new_run_in_a_finished_runs_folder(tmp_path, capsys):
    flags = ["--task=random_walk", "--core=lstm", "--grid-size=3", "--walk-length=8", "--n-train=16", "--n-valid=8", "--n-test=8",
             "--d-model=8", "--batch-size=4", "--bptt=8", "--max-updates=2", "--eval-every=2", "--threads=1", "--no-progress",
             f"--run-dir={tmp_path}"]
    seqtasks_main(flags)
    capsys.readouterr()
    assert "already holds a run (checkpoint.pt)" in refused(capsys, seqtasks_main, flags)
    seqtasks_main([*flags, "--overwrite"])
