"""Where an experiment's jobs run: here (`--launcher local`, the default: `--jobs` processes at
once) or as Slurm jobs (`--launcher slurm`, experiments/frame/slurm.py), with the flags every
experiment takes for it (`add_launcher_arguments`) and the stage runner they all call.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from envs.cli import positive_int
from experiments.frame.jobs import Job, JobFailed, machine, run_jobs


def slurm_minutes(text: str) -> int:
    """Slurm's time formats as minutes: MINUTES, HOURS:MINUTES:SECONDS, DAYS-HOURS[:MINUTES[:SECONDS]]."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if match is None or (match[1] is None and match[3] is not None and match[4] is None):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Slurm time (MINUTES, H:MM:SS or D-H[:MM[:SS]])")
    days, first, second, third = (int(group) if group else 0 for group in match.groups())
    if match[1] is None and match[3] is None:
        minutes = first  # MINUTES
    elif match[1] is None:
        minutes = 60 * first + second + (third > 0)  # H:MM:SS, seconds rounded up
    else:
        minutes = 24 * 60 * days + 60 * first + second + (third > 0)
    if minutes < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is under a minute; Slurm jobs here get at least 1 minute")
    return minutes


def sbatch_text(text: str) -> str:
    """A value that goes into the job script's #SBATCH lines, refused if it has a newline or any
    other control character: the line would end there, and sbatch ignores every #SBATCH line after
    the first that is not one (the job would run without its time limit, partition, account...)."""
    if not text.isprintable():
        bad = next(char for char in text if not char.isprintable())
        raise argparse.ArgumentTypeError(f"{text!r} has {bad!r} in it; a value for sbatch is one line of printable "
                                         "characters (no newline, carriage return, tab or other control character)")
    return text


def slurm_option(text: str) -> tuple[str, str]:
    """KEY=VALUE for any other sbatch option: "account=lab", "mem=8G", "qos=high"."""
    key, equals, value = sbatch_text(text).partition("=")
    if not equals or not re.fullmatch(r"[a-z][a-z0-9-_]*", key.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE with an sbatch option name (e.g. account=lab, mem=8G)")
    return key.strip().replace("-", "_"), value.strip()


def add_launcher_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where the runs go (docs/cluster.md)")
    group.add_argument("--launcher", choices=["local", "slurm"], default="local",
                       help="local: processes on this machine (default); slurm: one Slurm job per run, through submitit")
    group.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1, help="local: runs at once (default: the CPU count)")
    group.add_argument("--slurm-partition", type=sbatch_text, default=None, help="slurm: the partition (default: the cluster's default)")
    group.add_argument("--slurm-time", type=slurm_minutes, default=60, metavar="TIME",
                       help="slurm: each job's time limit, MINUTES or H:MM:SS (default: 60); a run that meets it saves and is requeued")
    group.add_argument("--slurm-cpus-per-job", type=positive_int, default=1, help="slurm: CPUs per job (default: 1; runs use one thread)")
    group.add_argument("--slurm-gpus-per-job", type=int, choices=range(0, 9), default=0, metavar="N", help="slurm: GPUs per job (default: 0)")
    group.add_argument("--slurm-max-parallel", type=positive_int, default=256, help="slurm: jobs of an array running at once (default: 256)")
    group.add_argument("--slurm-option", type=slurm_option, action="append", default=[], metavar="KEY=VALUE",
                       help="slurm: any other sbatch option, e.g. account=lab or mem=8G (repeatable)")
    group.add_argument("--no-wait", action="store_true", help="slurm: submit and exit; the same command later waits and aggregates")


def where_runs_go(args: argparse.Namespace) -> str:
    """For an experiment's first line: "2 at a time" here, or "as Slurm jobs"."""
    return f"{args.jobs} at a time" if args.launcher == "local" else f"as Slurm jobs ({args.slurm_max_parallel} at a time at most)"


def launcher_description(args: argparse.Namespace) -> str:
    """How the runs shared their machines, for an experiment's JSON."""
    if args.launcher == "slurm":
        from experiments.frame.machine import cpu_model

        return (f"Slurm jobs ({args.slurm_partition or 'default partition'}), {args.slurm_cpus_per_job} CPU(s) and "
                f"{args.slurm_gpus_per_job} GPU(s) each, 1 thread per run; submitted from {cpu_model()}")
    return machine(args.jobs)


def run_stages(stages: dict[str, list[Job]], args: argparse.Namespace) -> None:
    """Run each stage's jobs in turn ({"training": [...], "evaluation": [...]}) where `args`
    says (`--launcher`); a failed job ends the program with its error once its stage is done.
    With `--no-wait` the program ends after submitting what it can (exit 0, saying so). Records
    finished before (by an earlier command, or a runner without a ledger) go into the jobs'
    ledgers first."""
    for job in (job for jobs in stages.values() for job in jobs):
        job.keep()
    try:
        if args.launcher == "local":
            for what, jobs in stages.items():
                run_jobs(jobs, args.jobs, what)
            return
        from experiments.frame.slurm import (
            SlurmSettings,
            check_slurm,
            job_folder,
            run_jobs_slurm,
        )

        check_slurm()
        settings = SlurmSettings(args.slurm_partition, args.slurm_time, args.slurm_cpus_per_job, args.slurm_gpus_per_job,
                                 args.slurm_max_parallel, dict(args.slurm_option), wait=not args.no_wait)
        for what, jobs in stages.items():
            if not run_jobs_slurm(jobs, settings, what, job_folder(jobs)):
                print(f"submitted; run the same command again to wait for the {what} jobs and go on", file=sys.stderr)
                sys.exit(0)
    except JobFailed as error:
        sys.exit(f"error: {error}")
