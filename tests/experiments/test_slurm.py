"""`--launcher slurm` against a real Slurm (scripts/local_slurm.sh starts a one-node cluster with
accounting; .ci/run starts it before the tests). Where no Slurm controller answers, these tests
skip, saying why: the README's test command needs neither root nor Slurm.

Each test has a fresh folder: Slurm's job ids restart at 1 when its state is wiped, and a reused
folder would pick up an old job's result.
"""

import json
import signal
import subprocess
import sys

import pytest

from agents.runtime.checkpoint import load_checkpoint
from experiments.frame.jobs import Job, JobFailed
from experiments.frame.slurm import check_slurm
from tests.launch import DEADLINE, ROOT, wait_until


def slurm_answers() -> str:
    """Why Slurm cannot be used here (the launcher's own check), or "" when it can."""
    try:
        check_slurm()
    except JobFailed as error:
        return f"{error} (sudo scripts/local_slurm.sh starts a local cluster)"
    return ""


WHY_NOT = slurm_answers()  # asked once, at collection
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT or "Slurm answers")


def experiment(tmp_path, name: str, *extra: str, frames: int = 2048) -> list[str]:
    """A quick mazes experiment on the corridor with the LSTM core, 2 seeds."""
    return [sys.executable, "-m", "experiments.mazes", "--quick", "--envs", "corridor", "--cores", "lstm", "--seeds", "2",
            "--frames", str(frames), "--name", name, "--runs-dir", str(tmp_path / name), "--out", str(tmp_path / "out"),
            "--no-estimate", *extra]


def run(command: list[str], timeout: float = DEADLINE) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def per_seed(tmp_path, name: str) -> list[dict]:
    """The per-seed numbers of an experiment, without the wall times (which differ run to run)."""
    runs = json.loads((tmp_path / "out" / f"{name}.json").read_text())["envs"]["corridor"]["cores"]["lstm"]["per_seed"]
    return [{key: value for key, value in seed.items() if key != "training_seconds"} for seed in runs]


def slurm_ids(tmp_path, name: str, seeds: int = 2) -> list[str]:
    return [json.loads((tmp_path / name / "corridor" / "lstm" / f"seed{seed}" / "train.slurm.json").read_text())["job_id"]
            for seed in range(seeds)]


def state(job_id: str) -> str:
    """The job's state as the controller has it (squeue), or "" once it has left the queue."""
    return subprocess.run(["squeue", "-h", "-r", "-o", "%T", "-j", job_id], capture_output=True, text=True).stdout.strip()


def test_slurm_gives_the_per_seed_numbers_of_local(tmp_path):
    run(experiment(tmp_path, "here"))
    run(experiment(tmp_path, "there", "--launcher", "slurm", "--slurm-time", "10"))
    assert per_seed(tmp_path, "there") == per_seed(tmp_path, "here")
    summary = json.loads((tmp_path / "out" / "there.json").read_text())
    assert summary["machine"].startswith("Slurm jobs")
    log = (tmp_path / "there" / "corridor" / "lstm" / "seed0" / "train.log").read_text()
    assert "checkpoint:" in log  # the job's output is in its run folder


def test_no_wait_then_the_same_command_submits_nothing_twice(tmp_path):
    # One job of the array at a time and runs far longer than the test: the first runs, the second waits.
    command = experiment(tmp_path, "twice", "--launcher", "slurm", "--no-wait", "--slurm-max-parallel", "1", frames=10**9)
    first = run(command)
    ids = slurm_ids(tmp_path, "twice")
    try:
        assert "2 jobs submitted" in first.stderr and "run the same command again" in first.stderr
        assert all(state(job_id) in {"PENDING", "RUNNING"} for job_id in ids)
        again = run(command)
        assert "0 jobs submitted, 2 already queued or running" in again.stderr
        assert slurm_ids(tmp_path, "twice") == ids

        # Waiting for them, then Ctrl-C: the jobs go on, and the message says how to cancel them.
        with open(tmp_path / "waiting.err", "w+") as err:
            waiting = subprocess.Popen([arg for arg in command if arg != "--no-wait"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
            assert wait_until(lambda: "already queued or running" in (tmp_path / "waiting.err").read_text(), waiting)
            waiting.send_signal(signal.SIGINT)
            assert waiting.wait(timeout=60) == 130
        message = (tmp_path / "waiting.err").read_text()
        assert "2 Slurm jobs go on" in message and f"scancel {ids[0].split('_')[0]}" in message
        assert all(state(job_id) in {"PENDING", "RUNNING"} for job_id in ids)
    finally:
        subprocess.run(["scancel", *ids], check=False)


def test_a_job_stopped_as_slurm_stops_it_saves_requeues_and_finishes(tmp_path):
    """SIGUSR2 to every process of the job, as Slurm sends it before a time limit (submitit asks
    for it): the trainer saves, submitit requeues the job, the requeued job resumes, and the run
    ends at the step count of an uninterrupted one."""
    frames = 16_384  # ~7 s of training a run here; the signal lands within a second of the first checkpoint (step 128)
    command = experiment(tmp_path, "requeued", "--launcher", "slurm", "--train-args", "--save-every 0.001", frames=frames)
    waiting = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = tmp_path / "requeued" / "corridor" / "lstm" / "seed0"
        assert wait_until(lambda: (run_dir / "checkpoint.pt").is_file(), waiting), "no first checkpoint"
        job_id = json.loads((run_dir / "train.slurm.json").read_text())["job_id"]
        subprocess.run(["scancel", "--signal=USR2", job_id], check=True)
        assert wait_until(lambda: state(job_id) == "PENDING", waiting), "the job was not requeued"
        stopped_at = load_checkpoint(run_dir, "a2c")["counters"]["global_step"]
        assert 0 < stopped_at < frames
        # Slurm holds a requeued job back (~2 min); release it, but not within the second its first
        # run was killed in: slurmd refuses a launch whose credential is no newer, to the second,
        # than the kill's revocation ("Killing non-startable batch ...: Job credential revoked"),
        # and the job ends FAILED
        subprocess.run(["scontrol", "update", f"jobid={job_id}", "starttime=now+3"], check=True)
        out, err = waiting.communicate(timeout=DEADLINE)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 0, err[-3000:]
    log = (run_dir / "train.log").read_text()
    assert "interrupted by SIGUSR2" in log and f"resuming {run_dir} at step {stopped_at:,}" in log
    assert load_checkpoint(run_dir, "a2c")["counters"]["global_step"] == frames


def test_a_failing_job_is_reported_with_its_log_tail_and_the_others_finish(tmp_path):
    from experiments.frame.slurm import SlurmSettings, run_jobs_slurm

    def job(name: str, code: str) -> Job:
        return Job(name, lambda: [sys.executable, "-c", code], tmp_path / name / "job.log", tmp_path / name / "job.done.json", "once")

    good, bad = job("good", "print('all well')"), job("bad", "import sys; print('the last words'); sys.exit(3)")
    with pytest.raises(JobFailed) as failed:
        run_jobs_slurm([good, bad], SlurmSettings(time_minutes=5), "checking", tmp_path / "slurm")
    message = str(failed.value)
    assert "1 of 2 checking jobs failed" in message
    assert "bad exited with 3" in message and "the last words" in message
    assert good.done and good.result()["last_line"] == "all well"


def test_torchrun_under_srun_trains_one_run_over_processes(tmp_path):
    """scripts/slurm_torchrun.sh as a user submits it (sbatch, here one node and 2 processes):
    the run ends well and its checkpoint was written by a world of 2."""
    run_dir = tmp_path / "run"
    flags = ["--env", "corridor", "--core", "lstm", "--core-opt", "hidden_size=8", "--num-envs", "4", "--rollout", "4",
             "--total-steps", "64", "--threads", "1", "--device", "cpu", "--run-dir", str(run_dir)]
    result = subprocess.run(["sbatch", "--wait", "--nodes=1", "--ntasks-per-node=1", "--cpus-per-task=2", "--time=10",
                             f"--output={tmp_path / 'job.log'}", f"--chdir={ROOT}",
                             f"--export=ALL,NPROC_PER_NODE=2,PYTHON={sys.executable},RDZV_PORT=29571",
                             "scripts/slurm_torchrun.sh", *flags], cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE)
    log = (tmp_path / "job.log").read_text() if (tmp_path / "job.log").is_file() else "(no log)"
    assert result.returncode == 0, f"{result.stderr}\n{log[-3000:]}"
    payload = load_checkpoint(run_dir, "a2c")
    assert payload["world_size"] == 2 and payload["counters"]["global_step"] == 64
