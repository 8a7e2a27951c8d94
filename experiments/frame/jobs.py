"""Running an experiment's commands (training runs, evaluations) in parallel processes.

Each `Job` is a command line run from the repository root with one torch / OpenMP thread, its
output going to a log file; locally each starts as a fork of one process that has imported torch
already (experiments/frame/preloaded.py), which saves each its 2.5 s of imports. When it exits 0
the runner writes the job's `record` (a JSON file: the command, its wall time, its last printed
line, where evaluate.py prints its numbers, and the job's `target`), and a job whose record has
the same target is never run again: an interrupted experiment, run again, continues with the jobs
it had not finished. A record that cannot be read (cut off, not JSON: durable/records.py) counts
as none, and so does a cut-off output the experiment
reads (a job's `outputs`): the job runs again instead of the experiment crashing on it. Training
jobs resume their own checkpoint (see `train_job`); their target is the frame budget, so a larger
--frames continues finished runs to it (and evaluates them again) instead of keeping the old
numbers, and a smaller one is refused (a finished run cannot be taken back to fewer frames).

`seq_job` is the same for a `python -m seqtasks` run, its target the update budget.

A job's `then` jobs run right after it in the same worker (a run's evaluations after its
training), so that a sweep stopped mid-stage leaves each run it finished evaluated too. A job
with a `ledger` (experiments/frame/ledger.py) has its record kept there as well, and counts as
done from the ledger where its run folder has no record: a sweep resumes on another machine.

A stop signal stops the experiment (durable/interrupt.py: Ctrl-C, and the SIGTERM, SIGHUP or
SIGUSR2 that `kill`, `timeout`, a closed terminal or a cluster send): each running command gets
the same signal, once (the trainers then save a checkpoint and exit 128 + the signal), the runner
waits for them and exits with the same code; nothing is left running. Commands run in their own
sessions, so a Ctrl-C typed at the terminal reaches them only through the runner, once. A second
signal is passed on too (a second Ctrl-C stops the trainers at once, still saving).

`run_stages` runs the stages here (the local launcher) or as Slurm jobs (experiments/frame/slurm.py),
as the experiment's `--launcher` flag says (experiments/frame/launch.py).
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from agents.learners.solve import RECORD as SOLVE_RECORD
from agents.runtime.run_folder import EVENTS_GLOB
from durable.interrupt import STOP_SIGNALS, signal_of, stop_signals_raise
from durable.owned_files import NotOurFile, open_append
from durable.records import read_record, write_json
from experiments.frame.curves import training_seconds
from experiments.frame.ledger import Ledger
from experiments.frame.preloaded import Preloaded, Started

Process = subprocess.Popen | Started  # a running command: pid, send_signal, poll, wait

ROOT = Path(__file__).resolve().parents[2]  # the repository root, where the commands run
ALGOS = ("a2c", "ppo", "dqn")  # the learners an RL experiment can train with: train_a2c.py, train_ppo.py, train_dqn.py
EVAL_SEED = 10_000  # evaluate.py --seed: evaluation streams, never training's (agents/runtime/seeding.py), nor its default 0's


@dataclass
class Job:
    name: str
    command: Callable[[], list[str]]  # built when the job starts (a training run may resume)
    log: Path
    record: Path
    target: str = ""  # what the finished job reached (e.g. "2000000 frames"); another target reruns it
    work: tuple[str, list[str], int] | None = None  # a training job's program, its arguments and units (estimate.py)
    outputs: tuple[Path, ...] = ()  # JSON files the command writes that the experiment reads (results.json)
    measure: Callable[[], dict] | None = None  # more fields for the record, read when the command has ended well
    then: tuple[Job, ...] = ()  # jobs run right after this one ends well, in the same worker (its run's evaluations)
    ledger: Ledger | None = None  # where the record is kept beyond the run folder
    settings: tuple[str, ...] = ()  # what the run is made with (a training job's flags): a record made with others is not this job's
    keeps: Path | None = None  # the file its `then` jobs read (a training run's checkpoint)

    @property
    def done(self) -> bool:
        """Whether the job finished at its target and its outputs read whole; if not, it runs (again).
        A finished job whose `then` jobs must run (again: an evaluation whose target changed) and
        whose `keeps` file they read is gone (a checkpoint, on a machine without the run folder)
        runs again too, to make it: a ledger keeps records, not checkpoints."""
        result = self.result()
        # Records from before jobs kept their settings have none, and count as made with these.
        finished = (result is not None and result.get("target", "") == self.target
                    and result.get("settings", list(self.settings)) == list(self.settings)
                    and all(read_record(output) is not None for output in self.outputs))
        lost = self.keeps is not None and not self.keeps.exists() and not all(step.done for step in self.then)
        return finished and not lost

    def result(self) -> dict | None:
        """The job's record, as run_job wrote it, from its run folder or else its ledger; the
        ledger's copy where it holds the run folder's and more (the measures a later runner added
        to an older runner's record: `keep`); None where there is none or it cannot be read."""
        record = job_record(self.record)
        if self.ledger is None or (record is not None and not self.ledger.holds(self.record, record)):
            return record
        return self.ledger.get(self.record)

    def keep(self) -> None:
        """Copy the record from the run folder into the job's ledger, if it has both; a record
        written before its job measured (an older runner) gets the measures first."""
        record = job_record(self.record)
        if self.ledger is None or record is None or self.ledger.holds(self.record, record):
            return  # nothing to keep, or kept already (reading the measures again costs a run's event files)
        measured = self.measure() if self.measure is not None else {}
        if not measured.keys() <= record.keys():
            record = {**measured, **record}
        self.ledger.put(self.record, record)


def job_record(path: Path) -> dict | None:
    """The record at `path`, or None where it is missing, cut off or not a JSON object."""
    record = read_record(path)
    return record if isinstance(record, dict) else None


class JobFailed(RuntimeError):
    """A command exited with an error; the message names it and ends with its log's tail."""


def train_job(name: str, run_dir: Path, train_args: list[str], frames: int, algo: str = "a2c", traced: bool = False) -> Job:
    """`python train_ALGO.py ARGS --total-steps FRAMES --run-dir RUN_DIR` (train_a2c.py,
    train_ppo.py or train_dqn.py), or `--resume RUN_DIR` when a checkpoint of an unfinished run is
    there. `traced`: the same run through experiments/memory_trace.py (probes of the memory path,
    in RUN_DIR/trace.json: one of the job's outputs; A2C and PPO only)."""
    if algo not in ALGOS:
        raise ValueError(f"unknown algo {algo!r}; choose from {list(ALGOS)}")
    if traced and algo == "dqn":
        raise ValueError("experiments/memory_trace.py traces train_a2c.py and train_ppo.py runs, not train_dqn.py's")
    record = run_dir / "train.done.json"
    program = [sys.executable, "-m", "experiments.memory_trace", algo] if traced else [sys.executable, f"train_{algo}.py"]
    made_with = run_dir.with_name(run_dir.name + ".train_args.json")  # beside the run folder, which is the trainer's

    def command() -> list[str]:
        refuse_smaller_budget(record, frames, "frames")
        kept = read_record(made_with)
        if (run_dir / "checkpoint.pt").exists():
            if kept is not None and kept != train_args:
                raise JobFailed(f"{run_dir} was trained with other flags ({shlex.join(kept)}), not {shlex.join(train_args)}; "
                                "give the experiment another --name or --runs-dir for runs with other settings")
            return [*program, "--resume", str(run_dir), "--total-steps", str(frames), "--threads", "1"]
        made_with.parent.mkdir(parents=True, exist_ok=True)
        write_json(made_with, train_args)
        return [*program, *train_args, "--total-steps", str(frames), "--threads", "1", "--run-dir", str(run_dir), *restart(run_dir)]

    outputs = (run_dir / "trace.json",) if traced else ()
    return Job(name, command, run_dir / "train.log", record, f"{frames} frames", (f"train_{algo}", train_args, frames), outputs,
               measure=lambda: {"training_seconds": round(training_seconds(run_dir), 1)}, settings=tuple(train_args),
               keeps=run_dir / "checkpoint.pt")


def keeping_solve_checks(training: Job) -> Job:
    """The training job with its run's solve checks (RUN/solve.json, agents/learners/solve.py: each
    check's score, the frames to solve or the cap it was censored at) kept in its record as
    "solve", so the ledger holds them once the run folder is gone; None for a run trained
    without --solve-at."""
    seconds, solve = training.measure, training.record.parent / SOLVE_RECORD
    return replace(training, measure=lambda: {**(seconds() if seconds else {}), "solve": read_record(solve)})


def solve_fields(solve: dict) -> dict:
    """A run's solve checks (its training record's "solve") as the run's fields in an experiment's
    JSON: solved, the frames, episodes and seconds to solve or the cap it was censored at, and
    each check's frames, episodes, score and confirmation, in that order."""
    return {"solved": solve["solved"], "frames_to_solve": solve["frames_to_solve"], "episodes_to_solve": solve["episodes_to_solve"],
            "seconds_to_solve": solve["seconds_to_solve"], "censored_at": solve["censored_at"],
            "checks": [{key: c[key] for key in ("frames", "episodes", "score", "confirmation") if key in c} for c in solve["checks"]]}


def restart(run_dir: Path) -> list[str]:
    """["--overwrite"] where the job's own run folder holds the event files of a run of it killed
    before its first checkpoint (a trainer deletes those only when told: run_folder.start_afresh)."""
    return ["--overwrite"] if any(run_dir.glob(EVENTS_GLOB)) else []


def run_seconds(job: Job) -> float:
    """A finished training job's seconds in updates (experiments/frame/curves.py): kept in its
    record since 2026-11-28, so that a run restored from a ledger, whose event files are gone,
    has them; a run with an older record reads its event files."""
    seconds = job.result().get("training_seconds")
    return seconds if seconds is not None else round(training_seconds(job.record.parent), 1)


def refuse_smaller_budget(record: Path, budget: int, unit: str) -> None:
    """Raise JobFailed if the finished run whose record is `record` had a budget above `budget`
    (`unit`: "frames" or "updates"): resuming it would keep its longer training. A record that
    cannot be read says nothing: the run resumes from its checkpoint, which keeps its own count."""
    number, _, named = str((job_record(record) or {}).get("target", "")).partition(" ")
    trained = int(number) if number.isdigit() and named == unit else 0
    if trained > budget:
        raise JobFailed(f"{record.parent} is already trained to {trained:,} {unit}, more than the {budget:,} asked for; "
                        "give another --runs-dir to train to fewer")


def seq_job(name: str, run_dir: Path, seq_args: list[str], updates: int) -> Job:
    """`python -m seqtasks ARGS --max-updates UPDATES --run-dir RUN_DIR`, or `--resume RUN_DIR`
    when a checkpoint of an unfinished run is there; a budget below a finished run's is refused,
    as train_job refuses it. Its numbers are RUN_DIR/results.json (the test metrics and the
    validation history; see seq_results)."""
    record = run_dir / "train.done.json"

    def command() -> list[str]:
        refuse_smaller_budget(record, updates, "updates")
        if (run_dir / "checkpoint.pt").exists():
            return [sys.executable, "-m", "seqtasks", "--resume", str(run_dir), "--max-updates", str(updates), "--threads", "1", "--no-progress"]
        return [sys.executable, "-m", "seqtasks", *seq_args, "--max-updates", str(updates), "--threads", "1",
                "--run-dir", str(run_dir), "--no-progress", *restart(run_dir)]

    return Job(name, command, run_dir / "train.log", record, f"{updates} updates", ("seqtasks", seq_args, updates),
               (run_dir / "results.json",))


def seq_flags(values: dict) -> list[str]:
    """`python -m seqtasks` flags of config fields: {"seq_length": 100} -> ["--seq-length", "100"]."""
    return [token for key, value in values.items() for token in (f"--{key.replace('_', '-')}", str(value))]


def seq_results(job: Job) -> dict:
    """The results.json of a finished seq_job (one of its outputs, so it reads whole): test and
    valid metrics, updates, train_seconds, history."""
    return read_record(job.record.parent / "results.json")


def evaluate_job(run_dir: Path, episodes: int, frames: int, greedy: bool = False, seed: int = EVAL_SEED, tag: str = "",
                 acts: str = "") -> Job:
    """`python evaluate.py RUN_DIR` on the run's final checkpoint, after `frames` of training;
    its numbers are the JSON line it prints last (see `evaluation`). `tag` names a second
    evaluation of the same run (its log and record are evaluate-TAG.*). `acts` says how a policy
    that is not greedy acts where it does not sample (a DQN's "epsilon-greedy"): it joins the
    target, so a record from before evaluate.py acted so is evaluated again."""
    command = [sys.executable, "evaluate.py", str(run_dir), "--episodes", str(episodes), "--seed", str(seed)]
    command += ["--greedy"] if greedy else []
    stem = f"evaluate-{tag}" if tag else "evaluate"
    return Job(f"{stem} {run_dir}", lambda: command, run_dir / f"{stem}.log", run_dir / f"{stem}.done.json",
               f"{frames} frames, {episodes} episodes, seed {seed}" + (f", {acts}" if acts else ""))


def evaluation(job: Job) -> dict[str, dict[str, float]]:
    """{policy: {quantity: mean}} for "agent", "random" and "oracle" from a finished evaluate_job."""
    return evaluation_means(job.result())


def evaluation_means(record: dict) -> dict[str, dict[str, float]]:
    """evaluation()'s means from an evaluate_job's record (its .done.json, or the ledger's copy)."""
    results = json.loads(record["last_line"])["results"]
    return {policy: {key: value["mean"] for key, value in numbers.items()} for policy, numbers in results.items()}


def machine(workers: int) -> str:
    """The machine and how the runs shared it, for an experiment's JSON."""
    from experiments.frame.machine import cpu_model

    return f"{cpu_model()}, {os.cpu_count()} cores; {workers} runs at once, 1 thread each"


def job_env() -> dict[str, str]:
    """The environment every command runs in: this one, with one OpenMP / MKL thread."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def popen(command: list[str], log) -> subprocess.Popen:
    """Start `command` in the repository root as a new process in a session of its own, its
    output and errors to the open file `log`."""
    return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=job_env(), start_new_session=True)


_server: Preloaded | None = None  # the command server of this process
_server_lock = threading.Lock()  # the stages' worker threads may ask at once


def command_server() -> Preloaded:
    """The server this process's commands start from (experiments/frame/preloaded.py): started by
    the first stage and kept for the next ones (its import is that of a command); one started with
    another environment (preloaded.imported_with) is stopped first. It stops when this process exits."""
    global _server
    env = job_env()
    with _server_lock:
        if _server is None or not _server.serves(env):
            if _server is not None:
                _server.close()
            _server = Preloaded(env, ROOT)
        return _server


@atexit.register
def close_command_server() -> None:
    if _server is not None:
        _server.close()


def run_job(job: Job, started_process: Callable[[Process], None] = lambda process: None, start: Callable[..., Process] = popen) -> dict:
    """Run one job's command to its end here, its output to the job's log (appended: a resumed
    run's log keeps what came before); write and return its record. `start(command, log)` starts
    it (`popen`, or a Preloaded server's start); `started_process` is told of the process once it
    runs. Raises JobFailed, with the log's tail, if it exits non-zero."""
    job.log.parent.mkdir(parents=True, exist_ok=True)
    command = job.command()
    started = time.monotonic()
    try:
        log_file = open_append(job.log)  # a log that is a link, a folder or a pipe is refused, not followed
    except NotOurFile as error:
        raise JobFailed(f"{job.name}: {error}") from None
    with log_file as log:
        offset = log.tell()
        process = start(command, log)
        started_process(process)
        returncode = process.wait()
    output = job.log.read_text()[offset:]
    if returncode != 0:
        raise JobFailed(f"{job.name} exited with {returncode}: {' '.join(command)}\n--- {job.log} (end) ---\n{output[-2000:]}")
    lines = [line for line in output.splitlines() if line.strip()]
    record = {"command": command, "wall_seconds": round(time.monotonic() - started, 1), "last_line": lines[-1] if lines else "",
              "target": job.target, **({"settings": list(job.settings)} if job.settings else {}), **(job.measure() if job.measure else {})}
    write_json(job.record, record)
    return record


def run_jobs(jobs: list[Job], workers: int, what: str) -> None:
    """Run the jobs without a record here, at most `workers` at once. Raises JobFailed after
    the others have finished if any failed; on a stop signal passes it to the running commands,
    waits for them and exits with 128 + the signal."""
    todo = [job for job in jobs if not job.done]
    running: dict[str, Process] = {}  # by job name
    lock = threading.RLock()  # re-entrant: a second signal may come while the handler holds it
    stop_signals: list[int] = []  # the stop signals received, in order

    def run(job: Job) -> None:
        def started(process: Process) -> None:
            with lock:
                running[job.name] = process
                for signum in stop_signals:  # a signal came while this one was starting
                    process.send_signal(signum)

        try:
            for step in (job, *job.then):
                if stop_signals:
                    return
                if step is job or not step.done:  # a `then` step measured already is kept as it is
                    server = command_server()
                    record = run_job(step, started, lambda command, log: server.start(command, log, job_env()))
                    if step.ledger is not None:
                        step.ledger.put(step.record, record)
        finally:
            with lock:
                running.pop(job.name, None)

    def pass_on(signum, frame=None) -> None:
        with lock:
            stop_signals.append(signum)
            for process in running.values():
                if process.poll() is None:
                    process.send_signal(signum)  # the trainers save a checkpoint and exit 128 + signum

    failures = []
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc=what, unit="run", dynamic_ncols=True)
    executor = ThreadPoolExecutor(max_workers=workers)
    with stop_signals_raise():
        try:
            futures = {executor.submit(run, job): job for job in todo}
            for future in as_completed(futures):
                try:
                    future.result()
                except JobFailed as error:
                    failures.append(str(error))
                bar.update(1)
        except KeyboardInterrupt as interrupt:
            for signum in STOP_SIGNALS:  # a further signal while the commands stop is passed on too
                signal.signal(signum, pass_on)
            pass_on(signal_of(interrupt))
            executor.shutdown(wait=True, cancel_futures=True)
            bar.close()
            name = signal.Signals(stop_signals[0]).name
            print(f"\ninterrupted ({name}): finished runs are kept; run the same command again to continue", file=sys.stderr)
            sys.exit(128 + stop_signals[0])
    executor.shutdown(wait=True)
    bar.close()
    if failures:
        raise JobFailed(f"{len(failures)} of {len(todo)} {what} jobs failed:\n\n" + "\n\n".join(failures))
