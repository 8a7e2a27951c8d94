"""How long an experiment's training will take on this machine, measured before it starts.

Each distinct model of the experiment (its train_a2c.py, train_ppo.py, train_dqn.py or seqtasks
arguments without --seed) is built with one torch thread, as the runs will be, and timed over one
update after a warm-up update (after as many as fill its gradient window, with --bptt above the
rollout; a DQN's after its replay holds a sequence, so that the update timed learns; or over the
warm-up update alone when that took more than LONG_UPDATE seconds, as the paper preset's do on a
CPU: a little pessimistic, and half the wait): seconds per env frame, or per update of a
seqtasks run. The expected run time is then the budgets of the runs not yet finished (a run stopped half-way counts whole),
each at its model's rate, spread over the runs at once (and never less than the longest single
run). It is an estimate of this machine's time, taken while whatever else runs here is running:
with the paper preset on a CPU it is hours or days, which is what it should say before anyone
waits for it.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from durable.records import write_json
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
    (train_a2c, train_ppo or train_dqn)."""
    from agents.command_line import make_parser, make_trainer
    from agents.learners.dqn.trainer import DQNTrainer
    from agents.learners.ppo import PPOTrainer
    from agents.learners.train import Trainer

    trainer_class = {"train_a2c": Trainer, "train_ppo": PPOTrainer, "train_dqn": DQNTrainer}[program]
    # A DQN learns once its replay holds a sequence and --learning-starts frames were acted; the
    # frames before cost acting alone, a small share of a run, so the update timed is one that learns.
    learning = ["--learning-starts", "0"] if trainer_class is DQNTrainer else []
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as run_dir:
        parser = make_parser(trainer_class, "")
        args = parser.parse_args([*train_args, *learning, "--threads", "1", "--run-dir", run_dir])
        trainer = make_trainer(trainer_class, args, parser)
        try:
            c = trainer.config
            if trainer_class is DQNTrainer:
                while not len(trainer.replay):  # its first sequence is stored when an episode (or segment) ends
                    trainer.update()
                seconds = timed_update(trainer.update)
            else:
                # A gradient window (--bptt K > rollout T) fills over K / T - 1 updates, one following
                # episodes (--bptt episode) over the longest episode's (or --bptt-max's): time a full one.
                reach = (c.bptt_max or trainer.pool.longest_episode) if c.bptt == "episode" else c.max_history
                seconds = timed_update(trainer.update, max(1, -(-reach // c.rollout)))
        finally:
            trainer.close()
            torch.set_num_threads(threads)
    return seconds / (c.num_envs * c.rollout)


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
    """Seconds per unit of a job's work: an env frame of train_a2c, train_ppo or train_dqn, an update of seqtasks."""
    return seconds_per_update(args) if program == "seqtasks" else seconds_per_frame(args, program)


def unfinished_models(jobs: list[Job]) -> dict[tuple[str, tuple[str, ...]], Job]:
    """{(program, model_key): the first training job of that model not yet done}, in job order."""
    first = {}
    for job in jobs:
        if not job.done and job.work is not None:
            first.setdefault((job.work[0], model_key(job.work[1])), job)
    return first


def timed_rates(models: dict[tuple[str, tuple[str, ...]], Job]) -> dict[tuple[str, tuple[str, ...]], float]:
    """{(program, model_key): seconds per unit} of each of `models` (unfinished_models), timed on this machine."""
    return {key: seconds_per_unit(key[0], list(key[1])) for key in models}


def seconds_at(jobs: list[Job], rates: dict[tuple[str, tuple[str, ...]], float], workers: int) -> float:
    """Expected wall seconds of the training jobs not yet done at `rates` (timed_rates), `workers` at once."""
    seconds = [rates[job.work[0], model_key(job.work[1])] * job.work[2] for job in jobs if not job.done and job.work is not None]
    return spread_over(seconds, workers)


def expected_seconds(jobs: list[Job], workers: int) -> tuple[float, int]:
    """(expected wall seconds of the training jobs not yet done, how many models were timed)."""
    rates = timed_rates(unfinished_models(jobs))
    return seconds_at(jobs, rates, workers), len(rates)


def spread_over(seconds: list[float], workers: int) -> float:
    """Wall seconds of runs taking `seconds` each, `workers` at once: never less than the longest."""
    return max(sum(seconds) / workers, max(seconds)) if seconds else 0.0


def print_expected(seconds: float, detail: str) -> None:
    """The line every experiment prints before it starts: the expected wall time, then `detail`."""
    hours, minutes = divmod(round(seconds / 60), 60)
    print(f"expected training time on this machine: about {f'{hours} h ' if hours else ''}{minutes} min ({detail})", flush=True)


def write_estimate(path: Path, jobs: list[Job], workers: int, command: str, machine: str) -> None:
    """--estimate-only: time each model, print the expected time of every training job not yet
    done, each to its budget, and write it to `path` with each model's rate (named by its first
    run) and the command and machine it was measured for."""
    runs = sum(not job.done for job in jobs)  # before timing: a sweep running beside it finishes runs meanwhile
    first = unfinished_models(jobs)
    print(f"timing an update of each model to estimate the run time of {runs} runs, training none ...", flush=True)
    rates = timed_rates(first)
    seconds = seconds_at(jobs, rates, workers)
    print_expected(seconds, f"{len(rates)} models timed, {workers} runs at once, 1 thread each; every run to its cap")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"command": command, "machine": machine, "runs": runs, "models_timed": len(rates), "jobs_at_once": workers,
                      "expected_seconds_every_run_to_its_cap": round(seconds),
                      "rates": [{"first_run": first[key].name, "program": key[0], "seconds_per_unit": rate, "units_a_run": first[key].work[2]}
                                for key, rate in sorted(rates.items(), key=lambda item: first[item[0]].name)]}, indent=1)


def print_expected_time(jobs: list[Job], workers: int) -> None:
    """Measure, then print the expected training time (see the module docstring)."""
    todo = sum(1 for job in jobs if not job.done)
    if not todo:
        return
    print(f"timing an update of each model to estimate the run time of {todo} runs (--no-estimate skips this) ...", flush=True)
    seconds, models = expected_seconds(jobs, workers)
    print_expected(seconds, f"{models} models timed, {workers} runs at once, 1 thread each")
