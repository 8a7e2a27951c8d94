"""How long an experiment's training will take on this machine, measured before it starts.

Each distinct model of the experiment (its train_a2c.py or seqtasks arguments without --seed) is
built with one torch thread, as the runs will be, and timed over one update after a warm-up update
(after as many as fill its gradient window, with --bptt above the rollout; or over the warm-up update alone when that took more than LONG_UPDATE seconds, as the paper
preset's do on a CPU: a little pessimistic, and half the wait): seconds per env frame, or per
update of a seqtasks run. The expected run time is then the budgets of the runs not yet finished (a run stopped half-way counts whole),
each at its model's rate, spread over the runs at once (and never less than the longest single
run). It is an estimate of this machine's time, taken while whatever else runs here is running:
with the paper preset on a CPU it is hours or days, which is what it should say before anyone
waits for it.
"""

from __future__ import annotations

import tempfile
import time
from typing import Callable

import torch

from experiments.frame.jobs import Job

LONG_UPDATE = 10.0  # seconds


def model_key(train_args: list[str]) -> tuple[str, ...]:
    """The arguments that fix a run's speed: all but its seed."""
    key, skip = [], False
    for arg in train_args:
        if skip:
            skip = False
        elif arg == "--seed":
            skip = True
        else:
            key.append(arg)
    return tuple(key)


def timed_update(update: Callable[[], object], warmups: int = 1) -> float:
    """Seconds of one `update()` after `warmups` warm-up ones, or of the first warm-up alone when
    that took more than LONG_UPDATE seconds."""
    started = time.perf_counter()
    update()
    seconds = time.perf_counter() - started
    if seconds < LONG_UPDATE:
        for _ in range(warmups - 1):
            update()
        started = time.perf_counter()
        update()
        seconds = time.perf_counter() - started
    return seconds


def seconds_per_frame(train_args: list[str], program: str = "train_a2c") -> float:
    """Wall seconds per env frame of `python PROGRAM.py TRAIN_ARGS --threads 1` on this machine
    (train_a2c or train_ppo)."""
    from agents.command_line import make_parser, make_trainer
    from agents.learners.ppo import PPOTrainer
    from agents.learners.train import Trainer

    trainer_class = {"train_a2c": Trainer, "train_ppo": PPOTrainer}[program]
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as run_dir:
        parser = make_parser(trainer_class, "")
        args = parser.parse_args([*train_args, "--threads", "1", "--run-dir", run_dir])
        trainer = make_trainer(trainer_class, args, parser)
        try:
            # A gradient window (--bptt K > rollout T) fills over K / T - 1 updates, one following
            # episodes (--bptt episode) over the longest episode's (or --bptt-max's): time a full one.
            c = trainer.config
            reach = (c.bptt_max or trainer.pool.longest_episode) if c.bptt == "episode" else c.max_history
            seconds = timed_update(trainer.update, max(1, -(-reach // c.rollout)))
        finally:
            trainer.close()
            torch.set_num_threads(threads)
    return seconds / (trainer.config.num_envs * trainer.config.rollout)


def seconds_per_update(seq_args: list[str]) -> float:
    """Wall seconds per update of `python -m seqtasks SEQ_ARGS --threads 1` on this machine."""
    from seqtasks.__main__ import build_parser, make_run

    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as run_dir:
        parser = build_parser()
        args = parser.parse_args([*seq_args, "--threads", "1", "--run-dir", run_dir])
        run = make_run(args, parser, quiet=True)
        try:
            seconds = timed_update(run.step)
        finally:
            torch.set_num_threads(threads)
    return seconds


def seconds_per_unit(program: str, args: list[str]) -> float:
    """Seconds per unit of a job's work: an env frame of train_a2c or train_ppo, an update of seqtasks."""
    return seconds_per_update(args) if program == "seqtasks" else seconds_per_frame(args, program)


def expected_seconds(jobs: list[Job], workers: int) -> tuple[float, int]:
    """(expected wall seconds of the training jobs not yet done, how many models were timed)."""
    todo = [job for job in jobs if not job.done and job.work is not None]
    keys = {(job.work[0], model_key(job.work[1])) for job in todo}
    rates = {key: seconds_per_unit(key[0], list(key[1])) for key in keys}
    seconds = [rates[job.work[0], model_key(job.work[1])] * job.work[2] for job in todo]
    return spread_over(seconds, workers), len(rates)


def spread_over(seconds: list[float], workers: int) -> float:
    """Wall seconds of runs taking `seconds` each, `workers` at once: never less than the longest."""
    return max(sum(seconds) / workers, max(seconds)) if seconds else 0.0


def print_expected(seconds: float, detail: str) -> None:
    """The line every experiment prints before it starts: the expected wall time, then `detail`."""
    hours, minutes = divmod(round(seconds / 60), 60)
    print(f"expected training time on this machine: about {f'{hours} h ' if hours else ''}{minutes} min ({detail})", flush=True)


def print_expected_time(jobs: list[Job], workers: int) -> None:
    """Measure, then print the expected training time (see the module docstring)."""
    todo = sum(1 for job in jobs if not job.done)
    if not todo:
        return
    print(f"timing an update of each model to estimate the run time of {todo} runs (--no-estimate skips this) ...", flush=True)
    seconds, models = expected_seconds(jobs, workers)
    print_expected(seconds, f"{models} models timed, {workers} runs at once, 1 thread each")
