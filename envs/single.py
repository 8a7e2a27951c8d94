"""The single `gymnasium.Env`: a batch of one over an environment's `BatchedRules`.

A concrete env is two lines: a subclass naming its `rules_class` (and the keys `python -m
envs.play` maps to actions). Constructor keyword arguments go to the rules, which validate them.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

from envs.batch import BatchedRules, make_rules
from envs.scene import RENDER_MODES

ONLY_ENV = np.zeros(1, dtype=np.int64)


def check_render_mode(render_mode: str | None) -> None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"unknown render_mode {render_mode!r}; choose from {RENDER_MODES} or None")


class GridEnv(gym.Env):
    """One env. Its hidden state is `self.rules` (batch of one) and `hidden_state()`."""

    metadata = {"render_modes": RENDER_MODES, "render_fps": 8}
    rules_class: type[BatchedRules]
    key_actions: dict[str, int] = {}  # pygame key name -> action, for envs.play

    def __init__(self, render_mode: str | None = None, **kwargs: Any):
        check_render_mode(render_mode)
        self.render_mode = render_mode
        self.rules = make_rules(self.rules_class, 1, kwargs)
        self.observation_space = self.rules.single_observation_space
        self.action_space = self.rules.single_action_space
        self._renderer = None
        self._needs_reset = True

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.rules.rngs = [self.np_random]
        self.rules.reset(ONLY_ENV)
        self._needs_reset = False
        if self.render_mode == "human":
            self.render()
        return self.rules.observe()[0], self._info()

    def step(self, action):
        if self._needs_reset:
            raise ResetNeeded("call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in the action space {self.action_space}")
        reward, terminated, truncated = self.rules.step(np.array([action], dtype=np.int64))
        if self.render_mode == "human":
            self.render()
        obs = self.rules.observe()[0]
        return obs, float(reward[0]), bool(terminated[0]), bool(truncated[0]), self._info()

    def _info(self) -> dict[str, Any]:
        return {key: value[0].item() for key, value in self.rules.info().items()}

    def hidden_state(self) -> dict[str, Any]:
        """Agent position (and heading), layout, objects, goal, cell IDs: whatever the env hides."""
        return self.rules.hidden_state(0)

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode= to the constructor")
            return None
        if self._needs_reset:
            raise ResetNeeded("call reset() before render()")
        if self._renderer is None:
            from envs.render import Renderer  # pygame loads only when something is drawn

            self._renderer = Renderer(self.render_mode, self.metadata["render_fps"])
        return self._renderer.draw(self.rules.scene(0))

    def close(self):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_renderer"] = None  # a pygame window cannot be pickled; it reopens on render()
        return state
