"""The experiment runner under the signals a shell or a cluster sends: it passes each to its
training processes, waits for them (they save) and exits 128 + the signal, leaving no process
behind, and a run of the same command afterwards goes on from their checkpoints. Real processes,
real signals: SIGTERM to the runner alone (kill, timeout), SIGHUP (a closed terminal), and SIGINT
to a runner started with Ctrl-C ignored (as `python -m experiments.mazes ... &` is by the shell)."""

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agents.runtime.checkpoint import load_checkpoint
from tests.launch import ROOT, wait_until


def processes_mentioning(text: str) -> list[int]:
    """The pids of live processes whose command line contains `text` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                found.append(int(entry.name))
        except OSError:  # gone while we looked
            pass
    return found


@pytest.mark.parametrize("signum, sigint_ignored", [(signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGINT, True)])
def test_a_signalled_runner_stops_its_runs_saved_and_leaves_none_behind(tmp_path, signum, sigint_ignored):
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "experiments.mazes", "--quick", "--envs", "corridor", "--cores", "lstm", "--seeds", "2",
               "--frames", "100000000", "--train-args", "--save-every 0.001", "--jobs", "2",
               "--runs-dir", str(runs), "--out", str(tmp_path / "out")]
    checkpoints = [runs / "corridor" / "lstm" / f"seed{seed}" / "checkpoint.pt" for seed in (0, 1)]

    def start_ignoring_ctrl_c():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a non-interactive shell does for `cmd &`

    with tempfile.TemporaryFile("w+") as stderr:
        runner = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
                                  preexec_fn=start_ignoring_ctrl_c if sigint_ignored else None)
        try:
            assert wait_until(lambda: all(path.is_file() for path in checkpoints), runner), "the runs never saved"
            runner.send_signal(signum)
            runner.wait(timeout=120)
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.wait()
        stderr.seek(0)
        err = stderr.read()
    assert runner.returncode == 128 + signum, err
    assert f"interrupted ({signal.Signals(signum).name})" in err and "run the same command again" in err
    assert processes_mentioning(str(runs)) == [], "training processes outlived the runner"
    for path in checkpoints:
        assert load_checkpoint(path, "a2c")["envs"] is not None  # saved whole by the trainer
        assert f"interrupted by {signal.Signals(signum).name}" in (path.parent / "train.log").read_text() or signum == signal.SIGINT


FRAMES = 8_192  # 256 updates of the quick run: seconds, far more than the first one before the signal


def test_the_same_command_after_a_signal_goes_on_from_the_checkpoints(tmp_path):
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "experiments.mazes", "--quick", "--envs", "corridor", "--cores", "lstm", "--seeds", "2",
            "--frames", str(FRAMES), "--train-args", "--save-every 0.001", "--jobs", "2", "--runs-dir", str(runs), "--out", str(tmp_path / "out")]
    checkpoint = runs / "corridor" / "lstm" / "seed0" / "checkpoint.pt"
    runner = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(checkpoint.is_file, runner), "the run never saved"
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=120)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 128 + signal.SIGTERM
    stopped_at = load_checkpoint(checkpoint, "a2c")["counters"]["global_step"]
    assert 0 < stopped_at < FRAMES
    finished = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    log = (checkpoint.parent / "train.log").read_text()
    assert f"resuming {checkpoint.parent} at step {stopped_at:,}" in log  # the log keeps both parts
    assert load_checkpoint(checkpoint, "a2c")["counters"]["global_step"] == FRAMES
