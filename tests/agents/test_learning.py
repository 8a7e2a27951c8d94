"""Learning on the corridor: memory cores remember the cue, the memoryless MLP cannot; the
Feedback core learns it in bfloat16 (--precision bf16) too, and the LSTM with PPO.

The cue (blue or green) is seen only in the first cell; the doors are at the far end, 8 cells
on. An agent that walks to the end and guesses succeeds half the time; one that remembers, always.
"""

import numpy as np
import pytest
import torch

from agents.config.a2c_config import resolve_config
from agents.learners.ppo import PPOTrainer
from agents.learners.train import Trainer

CORRIDOR = {"length": 8, "max_episode_steps": 32}
SIZES = {
    "feedback": {"d_model": 32, "n_layers": 2, "n_heads": 2, "span": 16},
    "lstm": {"hidden_size": 64},
    "mlp": {"hidden_size": 64},
}
WINDOW = 300  # episodes the success rate is measured over


def train_until(core: str, max_frames: int, target: float, tmp_path, trainer_class=Trainer, **fields) -> float:
    """Train on the corridor until the success rate over the last WINDOW episodes reaches
    `target` or `max_frames` pass; returns that success rate. `fields` change the config."""
    given = dict(env="corridor", core=core, seed=1, num_envs=64, rollout=32, learning_rate=1e-3, threads=1, run_dir=str(tmp_path),
                 core_options=SIZES[core], env_options=CORRIDOR)
    trainer = trainer_class(resolve_config({**given, **fields}, trainer_class.config_class))
    successes: list[float] = []
    try:
        while trainer.global_step < max_frames:
            _, episodes = trainer.update()
            successes = (successes + episodes.values["success"])[-WINDOW:]
            if len(successes) == WINDOW and np.mean(successes) >= target:
                break
        if trainer.config.precision == "bf16":  # it ran in bfloat16, learning in float32
            assert trainer.actor.state.memory.dtype == torch.bfloat16
            assert {(p.dtype, p.grad.dtype) for p in trainer.policy.parameters()} == {(torch.float32, torch.float32)}
    finally:
        trainer.close()
    return float(np.mean(successes))


# The seed, frames and core options of each core's run. The LSTM here starts from PyTorch's gate
# biases, named: chrono's learns this 8-cell corridor with A2C 2-3 times more slowly (measured on
# the 2-core AVX2 EPYC, success over 300 episodes >= 0.95: chrono seed 4 at 1.59M frames, 170 s;
# PyTorch's biases seeds 1, 3 and 2 at 637k, 647k and 1.86M, 80-122 s, three runs side by side),
# and the PPO test below trains chrono's, with which its seeds were measured. An earlier count on
# an AVX-512 CPU had PyTorch's biases reach 0.95 within 2M frames from 9 of seeds 1-10 (not 6),
# seed 1 among them: 2M frames, the cap the test had, so that the run passes on both CPU kinds.
SEEDS = {"feedback": 1, "lstm": 1}
FRAMES = {"feedback": 1_500_000, "lstm": 2_000_000}
OPTIONS = {"feedback": SIZES["feedback"], "lstm": {**SIZES["lstm"], "gate_init": "pytorch"}}


@pytest.mark.slow
@pytest.mark.parametrize("core", ["feedback", "lstm"])
def test_memory_cores_solve_the_corridor(core, tmp_path):
    assert train_until(core, max_frames=FRAMES[core], target=0.95, tmp_path=tmp_path, seed=SEEDS[core], core_options=OPTIONS[core]) >= 0.9


@pytest.mark.slow
def test_ppo_with_the_lstm_solves_the_corridor(tmp_path):
    """Measured on the 2-core CPU (4 minibatches of 16 envs): seed 2 in 18 s, seeds 0 and 3 in 33
    and 50 s; seed 1, which solved it in 30 s when env i was seeded seed + i, now stays at 0.53
    after 600k frames: PPO here does not solve it from every seed."""
    assert train_until("lstm", max_frames=600_000, target=0.95, tmp_path=tmp_path, trainer_class=PPOTrainer, num_minibatches=4,
                       seed=2, core_options={**SIZES["lstm"], "gate_init": "chrono"}) >= 0.9


@pytest.mark.slow
def test_mlp_stays_near_chance(tmp_path):
    success = train_until("mlp", max_frames=400_000, target=2.0, tmp_path=tmp_path)  # never stops early
    assert 0.3 <= success <= 0.7


def test_feedback_learns_a_short_corridor_in_bf16(tmp_path):
    """A 3-cell corridor with no previous action or reward as input (only memory can carry the
    cue); measured: about 120k frames, 11 s on the 2-core CPU (float32: 65k)."""
    small = {"d_model": 16, "n_layers": 1, "n_heads": 2, "span": 8}
    success = train_until("feedback", max_frames=300_000, target=0.95, tmp_path=tmp_path, precision="bf16", num_envs=32, rollout=16,
                          learning_rate=2e-3, previous_inputs=False, core_options=small, env_options={"length": 3, "max_episode_steps": 12})
    assert success >= 0.9
