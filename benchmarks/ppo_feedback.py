"""Where the Feedback core's PPO update spends its time: against epochs x minibatches, and
against the episodes' length with and without packing them side by side.

    python -m benchmarks.ppo_feedback

The Feedback Transformer's memory is recurrent (each step's memory is made from all layers of the
step before), so recomputing a minibatch over the rollout is T sequential steps whatever the
minibatch's width; PPO recomputes every minibatch of every epoch, from its stored start state,
with the current weights (docs/training.md, "the memory contract"). This times one update (after
a warm-up one) of experiments/ppo_peers.py's Feedback agent, CleanRL's MiniGrid recipe (16 envs,
256-step rollouts, d 256, 2 layers, span 64), one thread, at 1 or 3 epochs of 1 or 8 minibatches:
if a minibatch of 2 envs costs about what one of 16 does, the update is bound by the sequential
steps (epochs x minibatches x T), not by the arithmetic. Then the recipe's update with the episodes
packed side by side (the default, agents/learners/episode_packing.py) and without (--no-pack-episodes), on
MemoryS9 with its 96-step limit (a random policy's episodes mostly run to it) and on
SymbolicMemoryS9Short-v0 (every episode ended by 24 steps, about a trained agent's length). Ratios
within one run are the result; the absolute figures are this machine's.
"""

from __future__ import annotations

from experiments.frame.estimate import seconds_per_frame
from experiments.ppo_peers import ENV, RECIPE, ours_args

SETTINGS = [(3, 8), (3, 1), (1, 1), (1, 8)]  # (epochs, minibatches); (3, 8) is the recipe
SHORT = "experiments.peer_envs:SymbolicMemoryS9Short-v0"  # episodes of at most 24 steps


def update_seconds(epochs: int, minibatches: int, env: str = ENV, packed: bool = True) -> float:
    """Seconds of one update (acting included) of the Feedback agent with these epochs and minibatches."""
    recipe = {**RECIPE, "epochs": epochs, "minibatches": minibatches}
    args = ours_args("feedback", env, 0, recipe) + ([] if packed else ["--no-pack-episodes"])
    return seconds_per_frame(args, "train_ppo") * recipe["num_envs"] * recipe["rollout"]


def main() -> None:
    frames = RECIPE["num_envs"] * RECIPE["rollout"]
    seconds = {setting: update_seconds(*setting) for setting in SETTINGS}
    print(f"Feedback core, PPO, {frames:,} frames per update, one thread:")
    for (epochs, minibatches), value in seconds.items():
        print(f"  {epochs} epoch(s) x {minibatches} minibatch(es) of {RECIPE['num_envs'] // minibatches} envs: "
              f"{value:.2f} s per update, {frames / value:,.0f} frames/s")
    whole = (seconds[3, 1] - seconds[1, 1]) / 2  # one recompute of all 16 envs: what an epoch of 1 minibatch adds
    acting = seconds[1, 1] - whole
    eighth = (seconds[1, 8] - acting) / 8  # one recompute of a minibatch of 2 envs
    print(f"acting {acting:.2f} s; a recompute of {RECIPE['num_envs']} envs {whole:.2f} s, of {RECIPE['num_envs'] // 8} envs "
          f"{eighth:.2f} s: {eighth / whole:.2f}x (1.00: bound by the sequential steps; 0.125: by the arithmetic)")
    print("the recipe's update (3 x 8), episodes packed side by side or each env's column whole:")
    for env in (ENV, SHORT):
        packed, whole = update_seconds(3, 8, env, True), update_seconds(3, 8, env, False)
        print(f"  {env.split(':')[-1]}: packed {packed:.2f} s, whole {whole:.2f} s per update: packed / whole {packed / whole:.2f}")


if __name__ == "__main__":
    main()
