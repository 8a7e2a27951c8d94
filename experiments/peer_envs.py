"""MiniGrid's Memory task as one flat symbolic observation, for our agents and the peers alike.

    gymnasium.make("experiments.peer_envs:SymbolicMemoryS9-v0")

CleanRL's ppo_trxl.py gives MiniGrid ids its own wrappers (a 3 x 3 view drawn as an 84 x 84 RGB
image, a 96-step time limit); any other id it makes as it is, and encodes a flat observation with
one linear layer. These ids are that task seen through the same 3 x 3 view (agent_view_size 3)
with the same 96-step limit, but as the view's symbols (object, colour, state of each of the 9
cells: 27 numbers) instead of their picture, and with no "MiniGrid" in the name: so ppo_trxl.py,
sb3-contrib's RecurrentPPO and our trainers all get the very same observation from this one file,
and no agent pays for drawing and convolving pixels that carry nothing more.

The module needs gymnasium and minigrid only, and works with the versions CleanRL pins
(gymnasium 0.29, minigrid 2.5) as with ours: the peer's own environment imports it from this
repository (PYTHONPATH), through Gymnasium's `module:EnvId` form.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

VIEW = 3  # cells on a side of the agent's view, as in ppo_trxl.py's MiniGrid wrapper
TIME_LIMIT = 96  # steps, as in ppo_trxl.py's MiniGrid wrapper
# A trained agent's episodes on S9 are short: about a dozen steps down the corridor to an object.
# SymbolicMemoryS9Short-v0 ends every episode by SHORT_LIMIT steps, so that speed can be measured
# at such lengths from the first update (benchmarks/ppo_feedback.py, docs/speed.md).
SHORT_LIMIT = 24
SIZES = (7, 9, 11, 13)  # MiniGrid's Memory sizes


class SymbolicView(gym.ObservationWrapper):
    """MiniGrid's observation dict -> its view's symbols, (VIEW * VIEW * 3,) float32 in [0, 255]."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        image = env.observation_space["image"]
        self.observation_space = gym.spaces.Box(0.0, 255.0, (int(np.prod(image.shape)),), np.float32)

    def observation(self, observation: dict) -> np.ndarray:
        return observation["image"].reshape(-1).astype(np.float32)


def make_symbolic_memory(size: int, **kwargs) -> gym.Env:
    """MiniGrid-MemoryS{size}-v0 with a VIEW x VIEW view, seen as symbols."""
    import minigrid  # noqa: F401  (registers the MiniGrid ids)

    return SymbolicView(gym.make(f"MiniGrid-MemoryS{size}-v0", agent_view_size=VIEW, **kwargs).unwrapped)


for _size in SIZES:
    gym.register(f"SymbolicMemoryS{_size}-v0", entry_point=make_symbolic_memory, max_episode_steps=TIME_LIMIT,
                 kwargs={"size": _size})
gym.register("SymbolicMemoryS9Short-v0", entry_point=make_symbolic_memory, max_episode_steps=SHORT_LIMIT, kwargs={"size": 9})
