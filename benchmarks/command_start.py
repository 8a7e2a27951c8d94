"""What an experiment's command costs to start: a fresh interpreter against a fork of the preloaded
command server (experiments/frame/preloaded.py), in CPU-seconds a command.

A tiny run is trained first (the corridor, the LSTM, 256 frames); then, for `--rounds` rounds,
interleaved, `--commands` evaluations of it (`evaluate.py RUN --episodes 4`) are started fresh
(experiments/frame/jobs.py:popen) and as forks of a server started for the round, whose own start
is counted in. CPU is this process's reaped children's (the server reaps its forks, and is reaped
when it closes), so each side's figure is everything it took. The target is a ratio of the two,
measured in the same run: fresh / forked >= 1.5, the server's start (a command's imports) shared
by the round's 4 commands.

    python benchmarks/command_start.py --rounds 3 --out assets/speed/command_start_epyc.json --check
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.targets import interleaved, ratio_target, report  # noqa: E402
from experiments.frame.jobs import ROOT, job_env, popen  # noqa: E402
from experiments.frame.machine import cpu_model  # noqa: E402
from experiments.frame.preloaded import Preloaded  # noqa: E402

TARGET = 1.5  # fresh / forked CPU a command, at 4 commands a round


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_a_command(side: str, command: list[str], commands: int, log) -> float:
    """CPU-seconds a command over `commands` runs of `command` started on `side`, the server's
    start included on the forked side."""
    before = children_cpu()
    if side == "fresh":
        for _ in range(commands):
            assert popen(command, log).wait() == 0, f"{command} failed"
    else:
        with Preloaded(job_env(), ROOT) as server:
            for _ in range(commands):
                assert server.start(command, log).wait() == 0, f"{command} failed"
    return (children_cpu() - before) / commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default: 3)")
    parser.add_argument("--commands", type=int, default=4, help="evaluations a side a round (default: 4)")
    parser.add_argument("--out", type=Path, default=None, help="write the per-round numbers as JSON here")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the target passes")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.commands < 1:
        parser.error(f"--rounds and --commands must be >= 1, got {args.rounds} and {args.commands}")
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder) / "run"
        subprocess.run([sys.executable, "train_a2c.py", "--env", "corridor", "--core", "lstm", "--total-steps", "256", "--num-envs", "4",
                        "--rollout", "8", "--threads", "1", "--run-dir", str(run)], cwd=ROOT, env=job_env(), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        command = [sys.executable, "evaluate.py", str(run), "--episodes", "4"]
        per_round: dict[str, list[float]] = {"fresh": [], "forked": []}
        with open(Path(folder) / "commands.log", "a") as log:
            for side in interleaved(["fresh", "forked"], args.rounds):
                per_round[side].append(round(cpu_a_command(side, command, args.commands, log), 2))
    fresh, forked = sum(per_round["fresh"]) / args.rounds, sum(per_round["forked"]) / args.rounds
    print(f"CPU-seconds an evaluation, {args.commands} a round: fresh {fresh:.2f}, forked {forked:.2f} (server included)")
    verdict = ratio_target("fresh / forked CPU a command", fresh, forked, TARGET, "")
    if args.out is not None:
        args.out.write_text(json.dumps({
            "command": "python benchmarks/command_start.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": f"{cpu_model()}, one command at a time", "commands_a_round": args.commands,
            "cpu_seconds_a_command": per_round, "ratio": round(fresh / forked, 2), "target": TARGET,
        }, indent=1) + "\n")
    return report([verdict], args.check)


if __name__ == "__main__":
    sys.exit(main())
