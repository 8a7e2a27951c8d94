"""Our recurrent DQN beside Ni et al.'s (twni2016/Memory-RL), on the passive T-maze at their settings:
wall seconds per 100,000 env steps of each, measured in one run on one machine.

    python benchmarks/dqn_memory_rl.py --checkout ~/Memory-RL --python ~/memory-rl-env/bin/python
    python benchmarks/dqn_memory_rl.py --checkout ~/Memory-RL --python ... --length 50 --episodes 20 --rounds 3 --json OUT.json

Their code (MIT) stays outside this repository: `--checkout` is a clone of
https://github.com/twni2016/Memory-RL anywhere but here, run by `--python`, an interpreter of its
own environment. It pins gym 0.21 and torch 1.12 (Python 3.7-3.10); what installed it on a 2-core
Debian machine with Python 3.9 (their requirements.txt otherwise, which names more than the T-maze
needs): `pip install "setuptools==65.5.0" "wheel==0.38.4" "pip<24.1"`, then `torch==1.12.1
gym==0.21.0 numpy==1.23.0 absl-py==1.3.0 ml-collections tensorboardX future-fstrings
"optax==0.1.3" "jax<0.4.14" "jaxlib<0.4.14" "chex<0.1.83" "scipy<1.12" transformers==4.22.1`. With
absl 1.3 their main.py sets a flag it never defined (`FLAGS.run_name = uid`) and exits; one line
added to their main.py beside the other flags fixes it: `flags.DEFINE_string("run_name", None, "")`.

Their run is their README's LSTM command for the passive T-maze (configs/rl/dqn_default.py,
configs/seq_models/lstm_default.py, whole episodes replayed) at `--length`, with their evaluation
moved out of reach (`--config_env.eval_interval` past the run) so that both loops time acting and
learning only. Ours is train_dqn.py's learner built in this process at the same settings: one env,
an episode (L + 1 steps) acted per round of 0.25 optimiser steps a step (their ceil(0.25 (L + 1)),
ours 0.25 (L + 1) with the fraction carried), batches of 64 whole episodes, Adam at 3e-4, gamma
0.99, Polyak tau 0.005, double DQN, epsilon from 1 to 1/(L + 1) over the first 10% of
`--budget-episodes` episodes, a replay of 1,000 episodes, learning from the 11th episode, an LSTM
of 128 units at PyTorch's initialisation. The networks differ around the LSTM (their observation
and action embedders and a 256-256 Q head; our encoder and heads), as each suite builds them.

Each runs in turns (`--rounds`, interleaved, so no one always runs first): a round is `--episodes`
episodes. Their process is started once and paused (SIGSTOP) while ours runs; a round of theirs
lasts from SIGCONT until their progress.csv (one row an episode) has `--episodes` more episodes'
steps. Both first pass their learning start (10 random episodes and the updates they earn) untimed.
One thread each. The result is the ratio of their seconds per 100,000 steps to ours; the absolute
figures are this machine's under its load (printed).
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from agents.config.a2c_config import resolve_config  # noqa: E402
from agents.learners.dqn.trainer import DQNTrainer  # noqa: E402
from benchmarks.targets import interleaved  # noqa: E402
from durable.records import write_json  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402

REPOSITORY = "https://github.com/twni2016/Memory-RL"
START_EPISODES = 10  # their --start_training: random episodes before the first update, as ours learns from
STEPS = 100_000
POLL_SECONDS = 0.1


def their_command(args: argparse.Namespace, save_dir: Path) -> list[str]:
    """Their README's passive T-maze LSTM command at `--length`, evaluation out of reach."""
    return [args.python, "main.py", "--config_env", "configs/envs/tmaze_passive.py", "--config_env.env_name", str(args.length),
            "--config_env.eval_interval", str(10 * args.budget_episodes), "--config_rl", "configs/rl/dqn_default.py",
            "--train_episodes", str(args.budget_episodes), "--config_seq", "configs/seq_models/lstm_default.py",
            "--config_seq.sampled_seq_len", "-1", "--seed", "0", "--save_dir", str(save_dir)]


class Theirs:
    """Their main.py in a process of its own, run a round at a time and paused between rounds."""

    def __init__(self, args: argparse.Namespace, folder: Path):
        checkout, ours = args.checkout.resolve(), Path(__file__).resolve().parent.parent
        if checkout == ours or ours in checkout.parents:
            raise ValueError(f"{str(checkout)!r} is inside this repository; their code stays outside it")
        if not (checkout / "main.py").is_file() or not (checkout / "envs" / "tmaze.py").is_file():
            raise FileNotFoundError(f"{str(checkout)!r} is not a checkout of {REPOSITORY} (no main.py and envs/tmaze.py there)")
        self.folder, self.episode = folder, args.length + 1
        self.log = open(folder / "theirs.log", "w")
        self.process = subprocess.Popen(their_command(args, folder), cwd=checkout, stdout=self.log, stderr=subprocess.STDOUT,
                                        env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        self.wait_for(START_EPISODES * self.episode)  # their random pool and its updates, untimed
        self.process.send_signal(signal.SIGSTOP)

    def steps(self) -> int:
        """The env steps of the last episode their progress.csv records (0 before it exists)."""
        files = list(self.folder.rglob("progress.csv"))
        if not files:
            return 0
        with open(files[0]) as f:
            rows = [row for row in csv.reader(f) if row and row[0].isdigit()]
        return int(rows[-1][0]) if rows else 0

    def wait_for(self, steps: int) -> None:
        while self.steps() < steps:
            if self.process.poll() is not None:
                raise RuntimeError(f"their main.py exited with {self.process.returncode}; its output: {self.folder / 'theirs.log'}")
            time.sleep(POLL_SECONDS)

    def round(self, episodes: int) -> tuple[float, int]:
        """(seconds, steps) of `episodes` more of their episodes."""
        before = self.steps()
        started = time.perf_counter()
        self.process.send_signal(signal.SIGCONT)
        self.wait_for(before + episodes * self.episode)
        seconds = time.perf_counter() - started
        self.process.send_signal(signal.SIGSTOP)
        return seconds, self.steps() - before

    def close(self) -> None:
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        self.process.wait()
        self.log.close()


class Ours:
    """train_dqn.py's learner at their settings, in this process."""

    def __init__(self, args: argparse.Namespace, folder: Path):
        episode = args.length + 1
        given = dict(env="tmaze", env_options={"length": args.length}, core="lstm", core_options={"hidden_size": 128, "gate_init": "pytorch"},
                     num_envs=1, rollout=episode, batch_size=64, updates_per_step=0.25, learning_rate=3e-4, gamma=0.99, tau=0.005,
                     target_every=1, double_q=True, n_step=1, epsilon_schedule="ni", replay="episodes", replay_capacity=1000 * episode,
                     learning_starts=START_EPISODES * episode, total_steps=args.budget_episodes * episode, threads=1, seed=0,
                     run_dir=str(folder / "ours"))
        self.trainer = DQNTrainer(resolve_config(given, DQNTrainer.config_class))
        if self.trainer.longest_episode != episode:
            raise RuntimeError(f"our T-maze at length {args.length} lasts {self.trainer.longest_episode} steps, theirs {episode}")
        while self.trainer.global_step <= START_EPISODES * episode:  # the learning start and its first update, untimed
            self.trainer.update()

    def round(self, episodes: int) -> tuple[float, int]:
        before, started = self.trainer.global_step, time.perf_counter()
        for _ in range(episodes):
            self.trainer.update()
        return time.perf_counter() - started, self.trainer.global_step - before

    def close(self) -> None:
        self.trainer.close()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, required=True, help=f"a clone of {REPOSITORY}, outside this repository")
    parser.add_argument("--python", default=sys.executable, help="the Python of their environment (default: this one)")
    parser.add_argument("--length", type=int, default=50, help="the T-maze's corridor length L (default: 50, their LSTM's example)")
    parser.add_argument("--episodes", type=int, default=20, help="episodes per timed round (default: 20)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of each, interleaved (default: 3)")
    parser.add_argument("--budget-episodes", type=int, default=20_000,
                        help="the run's length in episodes, which sets epsilon's schedule (default: 20,000, their L = 50 command's)")
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    args = parser.parse_args(argv)
    for name in ("length", "episodes", "rounds", "budget_episodes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    torch.set_num_threads(1)
    load_before = load_line()
    with tempfile.TemporaryDirectory(prefix="dqn-memory-rl-") as folder:
        learners = {"theirs": Theirs(args, Path(folder)), "ours": None}
        try:
            learners["ours"] = Ours(args, Path(folder))
            rounds = {name: [] for name in learners}
            for name in interleaved(list(learners), args.rounds):
                seconds, steps = learners[name].round(args.episodes)
                rounds[name].append({"seconds": round(seconds, 3), "steps": steps})
        finally:
            for learner in learners.values():
                if learner is not None:
                    learner.close()
    per_steps = {name: STEPS * sum(r["seconds"] for r in runs) / sum(r["steps"] for r in runs) for name, runs in rounds.items()}
    result = {"command": "python benchmarks/dqn_memory_rl.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "their_command": their_command(args, Path("SAVE_DIR")), "their_repository": REPOSITORY,
              "machine": cpu_model(), "torch": torch.__version__, "threads": 1, "load_before": load_before, "load_after": load_line(),
              "length": args.length, "episodes_per_round": args.episodes, "rounds": rounds,
              "seconds_per_100k_steps": {name: round(value, 1) for name, value in per_steps.items()},
              "theirs_over_ours": round(per_steps["theirs"] / per_steps["ours"], 2)}
    print(f"# passive T-maze L = {args.length}, DQN with an LSTM at Ni et al.'s settings; {cpu_model()}, 1 thread each, "
          f"{args.rounds} interleaved rounds of {args.episodes} episodes; {load_before}")
    for name, value in per_steps.items():
        print(f"{name}: {value / 3600:.2f} h per {STEPS:,} steps")
    print(f"theirs / ours: {result['theirs_over_ours']:.2f}")
    if args.json:
        write_json(args.json, result, indent=1)
    return result


if __name__ == "__main__":
    main()
