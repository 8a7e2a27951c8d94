"""One training run of sb3-contrib's RecurrentPPO, logged as our runs are: the peer of our PPO
with the LSTM core in experiments/ppo_peers.py.

    python -m experiments.peer_sb3 --env experiments.peer_envs:SymbolicMemoryS9-v0 --seed 0 --frames 500000 --run-dir DIR

The policy is the one our LSTM agent has: one LSTM shared by the actor and the critic (sb3's
shared_lstm, no critic LSTM of its own), linear heads on it (net_arch []), the observation
flattened into it. Envs are `gymnasium.make` copies stepped in a loop (sb3's DummyVecEnv), as
our trainer and CleanRL step a Gymnasium id that is not ours. Every finished episode's return is
written to RUN_DIR's TensorBoard as `charts/episodic_return` at the frames done, our trainers' tag,
so experiments/frame/curves.py bins both alike. The last line printed is a JSON of the frames and the
seconds spent in `learn`. A run stopped before its end starts again from zero (RecurrentPPO
saves no rollout state to resume from); its old events are removed first.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import torch
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor
from torch.utils.tensorboard import SummaryWriter

from envs.cli import non_negative_float, positive_float, positive_int


class IntFlattenExtractor(FlattenExtractor):
    """FlattenExtractor with a Python int width: for a MultiDiscrete space sb3 2.9 gives
    numpy's sum(nvec), an np.int64 that torch >= 2.13's nn.LSTM rejects as input_size."""

    def __init__(self, observation_space: gym.Space):
        super().__init__(observation_space)
        self._features_dim = int(self._features_dim)


class EpisodeReturns(BaseCallback):
    """Writes each finished episode's return (VecMonitor's info["episode"]["r"]) at the frames done."""

    def __init__(self, writer: SummaryWriter):
        super().__init__()
        self.writer = writer

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.writer.add_scalar("charts/episodic_return", info["episode"]["r"], self.num_timesteps)
        return True


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True, help="a Gymnasium id, module:EnvId form included")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=positive_int, required=True, help="env frames to train for")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--num-envs", type=positive_int, default=16)
    parser.add_argument("--rollout", type=positive_int, default=256, help="steps per env per update (n_steps)")
    parser.add_argument("--update-epochs", type=positive_int, default=3, help="n_epochs")
    parser.add_argument("--num-minibatches", type=positive_int, default=8, help="batch_size = num_envs x rollout / this")
    parser.add_argument("--clip-coef", type=positive_float, default=0.2, help="clip_range")
    parser.add_argument("--learning-rate", type=positive_float, default=2.75e-4)
    parser.add_argument("--gamma", type=positive_float, default=0.995)
    parser.add_argument("--gae-lambda", type=positive_float, default=0.95)
    parser.add_argument("--entropy-coef", type=non_negative_float, default=1e-4)
    parser.add_argument("--value-coef", type=non_negative_float, default=0.5)
    parser.add_argument("--max-grad-norm", type=positive_float, default=0.25)
    parser.add_argument("--hidden-size", type=positive_int, default=128, help="LSTM units")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    steps = args.num_envs * args.rollout
    if steps % args.num_minibatches:
        parser.error(f"--num-minibatches {args.num_minibatches} must divide num_envs x rollout = {steps}")
    torch.set_num_threads(args.threads)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    for events in args.run_dir.glob("events.out.tfevents.*"):  # a stopped run's curve would be mixed into this one's
        events.unlink()

    env = VecMonitor(DummyVecEnv([lambda: gym.make(args.env) for _ in range(args.num_envs)]))  # seeded seed + i by RecurrentPPO
    model = RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=args.rollout, batch_size=steps // args.num_minibatches, n_epochs=args.update_epochs,
        learning_rate=args.learning_rate, gamma=args.gamma, gae_lambda=args.gae_lambda, clip_range=args.clip_coef,
        normalize_advantage=False, ent_coef=args.entropy_coef, vf_coef=args.value_coef, max_grad_norm=args.max_grad_norm,
        seed=args.seed, device="cpu",
        policy_kwargs=dict(lstm_hidden_size=args.hidden_size, n_lstm_layers=1, shared_lstm=True, enable_critic_lstm=False,
                           net_arch=[], features_extractor_class=IntFlattenExtractor),
    )
    writer = SummaryWriter(str(args.run_dir))
    started = time.perf_counter()
    model.learn(total_timesteps=args.frames, callback=EpisodeReturns(writer))
    seconds = time.perf_counter() - started
    writer.close()
    env.close()
    print(json.dumps({"frames": int(model.num_timesteps), "seconds": round(seconds, 1),
                      "frames_per_second": round(model.num_timesteps / seconds, 1)}))


if __name__ == "__main__":
    main()
