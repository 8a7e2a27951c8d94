"""An experiment's jobs as Slurm jobs, through submitit (`--launcher slurm`).

Each job (experiments/frame/jobs.py: a training run, an evaluation) becomes one Slurm job running the
same command the local launcher runs (`run_job`: its output appended to the job's log in its run
folder, its record written when it ends well), so results do not depend on the launcher. A
stage's jobs go in as one array (`--slurm-max-parallel` at once); submitit's own logs go to
`slurm/` beside the runs, named by job id.

Time limits and preemption: submitit asks Slurm to send SIGUSR2 SIGNAL_DELAY_S seconds before a
job's time limit, and Slurm sends it (or, on preemption, SIGTERM then SIGUSR2) to every process
of the job. The trainer takes it as a stop signal (durable/interrupt.py): it finishes the update
under way, saves its checkpoint and exits. submitit then calls `SlurmTask.checkpoint`, which waits
for the trainer to have saved and hands submitit the same task to requeue; the requeued job finds
the checkpoint and resumes (`train_job`), so nothing is lost or counted twice. Slurm holds a
requeued job back for about two minutes (Reason=BeginTime) before it runs again.

Fire and forget: job ids are kept beside the records (`*.slurm.json`). The same command run again
submits only the jobs that have no record and are not already queued or running (a `*.slurm.json`
that cannot be read, say cut off, names no job: that job is submitted again), waits for
those, and goes on to the next stage (`--no-wait`: submits and exits). Ctrl-C while waiting
leaves the jobs queued and says how to cancel them. A job that fails is reported with its log's
tail once the others are done, as local jobs are.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

from durable.records import write_json
from experiments.frame.jobs import Job, JobFailed, job_record, run_job

SIGNAL_DELAY_S = 120  # how long before its time limit a job is told to save: several updates at the paper's sizes
SAVE_SECONDS = 90  # how long SlurmTask.checkpoint waits for the trainer to save before asking it again
TIME_LIMIT_REQUEUES = 1000  # a long run may meet its time limit this many times (each time it resumes)
POLL_SECONDS = (1, 10)  # the waiting command asks Slurm (sacct) about its jobs after 1 s, then less often, every 10 s at most
ACTIVE = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "COMPLETING", "SUSPENDED",
          "RESIZING", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD"}  # squeue's states of a job that is not over


@dataclass
class SlurmSettings:
    """The Slurm resources of every job, from the experiment's --slurm-* flags."""

    partition: str | None = None
    time_minutes: int = 60
    cpus_per_job: int = 1
    gpus_per_job: int = 0
    max_parallel: int = 256
    options: dict[str, str] = field(default_factory=dict)  # any other sbatch option, e.g. {"account": "lab"}
    wait: bool = True

    def executor_parameters(self) -> dict:
        return {
            "time": self.time_minutes, "cpus_per_task": self.cpus_per_job, "array_parallelism": self.max_parallel,
            "signal_delay_s": SIGNAL_DELAY_S, "stderr_to_stdout": True, "additional_parameters": dict(self.options),
            **({"partition": self.partition} if self.partition else {}),
            **({"gpus_per_node": self.gpus_per_job} if self.gpus_per_job else {}),
        }


class SlurmTask:
    """What a Slurm job runs: one job's command, to its end, on the node (jobs.run_job)."""

    def __init__(self, job: Job):
        self.job = replace(job, ledger=None, then=())  # the runner keeps the ledger; Slurm runs `then` jobs as a stage of their own
        self._process: subprocess.Popen | None = None

    def __call__(self) -> dict:
        return run_job(self.job, self._started)

    def _started(self, process: subprocess.Popen) -> None:
        self._process = process

    def checkpoint(self):
        """submitit's preemption and time-limit hook, called on the job's SIGUSR2. The trainer got
        the signal from Slurm too and is saving: wait until it has exited (asking it again with
        SIGTERM if it has not within SAVE_SECONDS, say when only this process was signalled),
        then hand submitit this task to requeue; it resumes from the checkpoint."""
        import submitit

        process = self._process
        if process is not None:
            if not wait_for_exit(process.pid, SAVE_SECONDS):
                process.send_signal(signal.SIGTERM)
                wait_for_exit(process.pid, None)
        return submitit.helpers.DelayedSubmission(SlurmTask(self.job))

    def __getstate__(self) -> dict:
        return {"job": self.job, "_process": None}  # a process does not travel to the requeued job


def wait_for_exit(pid: int, timeout: float | None) -> bool:
    """Whether child `pid` exits within `timeout` seconds (None: wait as long as it takes). It is
    not reaped: this runs in a signal handler, which may have interrupted Popen.wait on the same
    child in the main thread (holding its lock), so it looks without taking the exit status."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while deadline is None or time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # already reaped by the main thread
            return True
        time.sleep(0.2)
    return False


def slurm_record(job: Job) -> Path:
    """Where a job's Slurm id is kept: beside its record (train.done.json -> train.slurm.json)."""
    return job.record.with_name(job.record.name.replace(".done.json", "") + ".slurm.json")


def active_job_ids(job_ids: list[str]) -> set[str]:
    """The ones of `job_ids` that Slurm still has queued or running (squeue: the controller's
    own view, current at once, where sacct may lag behind a submission)."""
    if not job_ids:
        return set()
    # -r: one line per array task (a pending array prints its tasks folded, "90_[1-3]", without it)
    result = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T", "-j", ",".join(job_ids)], capture_output=True, text=True)
    active = set()
    for line in result.stdout.splitlines():
        job_id, state = line.split()
        if state in ACTIVE:
            active.add(job_id)
    return active


def check_slurm() -> None:
    """Raise JobFailed if submitit or a Slurm controller is not there, saying what to do."""
    try:
        import submitit  # noqa: F401
    except ImportError as error:
        raise JobFailed('--launcher slurm needs submitit: pip install -e ".[experiments]"') from error
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired) as error:
        raise JobFailed(f"--launcher slurm needs Slurm's commands (scontrol, sbatch, sacct) on this machine: {error}") from error
    if ping.returncode != 0 or "UP" not in ping.stdout:
        raise JobFailed(f"no Slurm controller answers (scontrol ping: {(ping.stdout + ping.stderr).strip()})")


def submit(jobs: list[Job], settings: SlurmSettings, folder: Path) -> dict[str, object]:
    """Submit the jobs as one array; their ids are kept beside their records. Returns the
    submitit handles by job name."""
    import submitit

    executor = submitit.SlurmExecutor(folder=folder / "%j", max_num_timeout=TIME_LIMIT_REQUEUES)
    executor.update_parameters(job_name="feedback-rl", **settings.executor_parameters())
    with executor.batch():
        submitted = [executor.submit(SlurmTask(job)) for job in jobs]
    for job, slurm_job in zip(jobs, submitted):
        job.record.parent.mkdir(parents=True, exist_ok=True)
        write_json(slurm_record(job), {"job_id": slurm_job.job_id, "folder": str(folder)})
    return {job.name: slurm_job for job, slurm_job in zip(jobs, submitted)}


def reattach(jobs: list[Job]) -> dict[str, object]:
    """The submitit handles, by job name, of the jobs already queued or running from an earlier
    command (a record that cannot be read, or lacks either, names none)."""
    import submitit

    records = {job.name: job_record(slurm_record(job)) for job in jobs}
    kept = {name: saved for name, saved in records.items() if saved is not None and {"job_id", "folder"} <= saved.keys()}
    active = active_job_ids([saved["job_id"] for saved in kept.values()])
    return {name: submitit.SlurmJob(folder=Path(saved["folder"]) / "%j", job_id=saved["job_id"])
            for name, saved in kept.items() if saved["job_id"] in active}


def failure(job: Job, slurm_job) -> str:
    """What went wrong with a job that ended without its record: the error it raised on the node
    (JobFailed: the exit code and the log's tail), or, for a job cancelled or killed before it
    could say, Slurm's state and the log's tail."""
    try:
        error = str(slurm_job.exception() or "")
    except Exception:  # noqa: BLE001 - submitit raises when a job left no result (cancelled, killed)
        error = ""
    if "JobFailed: " in error:
        return error[error.rindex("JobFailed: ") + len("JobFailed: "):].strip()
    tail = job.log.read_text()[-2000:] if job.log.is_file() else "(no log)"
    return f"{job.name}: Slurm job {slurm_job.job_id} ended {slurm_job.state} without finishing\n--- {job.log} (end) ---\n{tail}"


def run_jobs_slurm(jobs: list[Job], settings: SlurmSettings, what: str, folder: Path) -> bool:
    """Submit the jobs without a record that are not queued or running already, then (unless
    settings.wait is off) wait for all of them. Returns whether the stage is done; raises
    JobFailed once all have ended if any failed; exits 130 on Ctrl-C, leaving the jobs queued."""
    todo = [job for job in jobs if not job.done]
    handles = reattach(todo)
    fresh = [job for job in todo if job.name not in handles]
    if fresh:
        handles.update(submit(fresh, settings, folder))
    ids = sorted({str(handle.job_id).split("_")[0] for handle in handles.values()})
    said = (f"{what}: {len(fresh)} jobs submitted, {len(todo) - len(fresh)} already queued or running "
            f"(Slurm {'array' if len(ids) == 1 else 'jobs'} {', '.join(ids)})") if todo else None
    if not settings.wait:
        if said:
            print(said, file=sys.stderr)
        return not todo
    failures, pending, delay, bar = [], {job.name: job for job in todo}, POLL_SECONDS[0], None
    try:  # from the moment the jobs are announced, Ctrl-C leaves them queued and says so
        if said:
            print(said, file=sys.stderr)
        bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc=what, unit="job", dynamic_ncols=True)
        while pending:
            time.sleep(delay)
            delay = min(2 * delay, POLL_SECONDS[1])
            handles[next(iter(pending))].done(force_check=True)  # one sacct call for every job of this watcher
            for name, job in list(pending.items()):
                if job.done or handles[name].done():
                    pending.pop(name)
                    bar.update(1)
                    job.keep()
                    if not job.done:
                        failures.append(failure(job, handles[name]))
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        left = sorted(str(handles[name].job_id) for name in pending)
        print(f"\nstopped waiting; {len(left)} Slurm jobs go on: {' '.join(left)}\n"
              f"run the same command again to wait for them, or cancel them: scancel {' '.join(ids)}", file=sys.stderr)
        sys.exit(130)
    bar.close()
    if failures:
        raise JobFailed(f"{len(failures)} of {len(todo)} {what} jobs failed:\n\n" + "\n\n".join(failures))
    return True


def job_folder(jobs: list[Job]) -> Path:
    """Where submitit keeps its files for these jobs: slurm/ in the folder that holds all their runs."""
    return Path(os.path.commonpath([str(job.log.parent) for job in jobs])) / "slurm"
