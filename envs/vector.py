"""The native vector env: a batch of many over an environment's `BatchedRules`.

`gymnasium.make_vec(id, num_envs=N)` builds it through each id's `vector_entry_point`. It
behaves like `gymnasium.vector.SyncVectorEnv` over N single envs, step for step (same seeds give
the same trajectories, infos in the same layout), without a Python loop over envs.

Autoreset (`autoreset_mode=`, declared in `metadata["autoreset_mode"]`):
- NEXT_STEP (default): the step after an episode ends resets that env, ignores its action and
  returns the first observation with reward 0.
- SAME_STEP: an env that ends is reset in the same step; the returned observation is the new
  episode's first, the last one is in `info["final_obs"]` and its info in `info["final_info"]`.
- DISABLED: the caller resets ended envs with `reset(options={"reset_mask": mask})`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from envs.batch import BatchedRules, check_int, make_rules
from envs.scene import RENDER_MODES
from envs.single import check_render_mode


def batch_info(info: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Vector-env info layout: each key beside a `_key` mask of the envs that carry it (all)."""
    out = {}
    for key, value in info.items():
        out[key] = value
        out["_" + key] = np.ones(len(value), dtype=bool)
    return out


def parse_autoreset_mode(mode: str | AutoresetMode) -> AutoresetMode:
    """An AutoresetMode from itself, its value ("NextStep") or its name in any case ("next_step")."""
    for candidate in AutoresetMode:
        if mode == candidate or str(mode).replace("_", "").lower() == candidate.value.lower():
            return candidate
    allowed = [candidate.value for candidate in AutoresetMode]
    raise ValueError(f"unknown autoreset_mode {mode!r}; choose from {allowed}")


class GridVectorEnv(VectorEnv):
    """N envs stepped together. Hidden state: `self.rules` and `hidden_state(i)`."""

    metadata = {"render_modes": RENDER_MODES, "render_fps": 8, "autoreset_mode": AutoresetMode.NEXT_STEP}
    rules_class: type[BatchedRules]

    def __init__(
        self,
        num_envs: int,
        render_mode: str | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_index: int = 0,
        **kwargs: Any,
    ):
        check_render_mode(render_mode)
        autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self.rules = make_rules(self.rules_class, num_envs, kwargs)
        self.num_envs = self.rules.num_envs
        self.render_index = check_int("render_index", render_index, 0, self.num_envs - 1)
        self.render_mode = render_mode
        self.autoreset_mode = autoreset_mode
        self.metadata = {**self.metadata, "autoreset_mode": autoreset_mode}
        self.single_observation_space = self.rules.single_observation_space
        self.single_action_space = self.rules.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._ended = np.zeros(self.num_envs, dtype=bool)  # episodes that ended on the last step
        self._all = np.arange(self.num_envs)
        self._needs_reset = True
        self._renderer = None

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict | None = None):
        """Reset every env, or those in `options["reset_mask"]`.

        seed: an int s seeds env i with s + i (as SyncVectorEnv does, so this env drops in for
        it); a list gives one seed (or None) per env; None keeps each env's generator, or draws
        fresh entropy the first time. s + i makes runs seeded s and s + 1 share envs, so the
        trainer and evaluation pass lists instead (agents/runtime/seeding.py:env_seeds).
        """
        super().reset(seed=seed if isinstance(seed, int) else None)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"unknown reset options {sorted(options)}; the only option is 'reset_mask'")
        idx = self._all if mask is None else self._reset_indices(mask)
        seeds = self._seeds(seed)
        for i in idx:
            if seeds[i] is not None or self.rules.rngs[i] is None:
                self.rules.rngs[i] = seeding.np_random(seeds[i])[0]
        self.rules.reset(idx)
        self._ended[idx] = False
        self._needs_reset = False
        if self.render_mode == "human":
            self.render()
        return self.rules.observe(), batch_info(self.rules.info())

    def _reset_indices(self, mask: Any) -> np.ndarray:
        mask = np.asarray(mask)
        if mask.shape != (self.num_envs,) or mask.dtype != bool:
            raise ValueError(f"reset_mask must be a bool array of shape ({self.num_envs},), got {mask!r}")
        return np.flatnonzero(mask)

    def _seeds(self, seed: int | list[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int):
            return [seed + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ValueError(f"seed must be an int, None or a list of {self.num_envs} seeds, got {len(seed)} seeds")
        return list(seed)

    def step(self, actions):
        if self._needs_reset:
            raise ResetNeeded("call reset() before step()")
        actions = np.asarray(actions)
        if self.autoreset_mode == AutoresetMode.DISABLED and self._ended.any():
            raise ResetNeeded(
                f"envs {np.flatnonzero(self._ended).tolist()} ended; with autoreset_mode DISABLED "
                "reset them with reset(options={'reset_mask': mask}) before stepping"
            )
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            return self._step_next_step(actions)
        return self._step_same_step(actions)

    def _step_next_step(self, actions: np.ndarray):
        restarting = np.flatnonzero(self._ended)
        reward, terminated, truncated = self.rules.step(actions)
        if len(restarting):
            # These envs ended last step: this step starts their next episode instead. Stepping
            # them above was harmless, as the reset overwrites all of their state.
            self.rules.reset(restarting)
            reward[restarting] = 0.0
            terminated[restarting] = False
            truncated[restarting] = False
        self._ended = terminated | truncated
        obs = self.rules.observe()
        if self.render_mode == "human":
            self.render()
        return obs, reward, terminated, truncated, batch_info(self.rules.info())

    def _step_same_step(self, actions: np.ndarray):
        """SAME_STEP resets ended envs within this step; DISABLED (the same path, no reset)
        leaves them ended until the caller resets them."""
        reward, terminated, truncated = self.rules.step(actions)
        obs = self.rules.observe()
        info = self.rules.info()
        ended = terminated | truncated
        if self.autoreset_mode == AutoresetMode.SAME_STEP and ended.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(ended):
                final_obs[i] = obs[i]
            final_info = {}
            for key, value in info.items():
                final_info[key] = np.where(ended, value, np.zeros_like(value))
                final_info["_" + key] = ended.copy()
            self.rules.reset(np.flatnonzero(ended))
            obs = self.rules.observe()
            info = batch_info(self.rules.info())
            info.update(final_obs=final_obs, _final_obs=ended.copy(), final_info=final_info, _final_info=ended.copy())
        else:
            self._ended = ended  # (all False under SAME_STEP; under DISABLED, envs awaiting a reset)
            info = batch_info(info)
        if self.render_mode == "human":
            self.render()
        return obs, reward, terminated, truncated, info

    def get_state(self) -> dict[str, Any]:
        """The batch's whole state as numpy arrays, numbers and strings (no Python objects), for
        a checkpoint: set_state on a vector env made with the same options continues bit for bit."""
        return {"rules": self.rules.state_dict(), "ended": self._ended.copy(), "needs_reset": self._needs_reset}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from what get_state returned; a ValueError naming what does not fit."""
        ended = np.asarray(state["ended"])
        if ended.shape != (self.num_envs,) or ended.dtype != bool:
            raise ValueError(f"the saved env state's episode ends are {ended.dtype}{list(ended.shape)}, expected bool[{self.num_envs}]")
        self.rules.load_state_dict(state["rules"])
        self._ended, self._needs_reset = ended.copy(), bool(state["needs_reset"])

    def hidden_state(self, i: int) -> dict[str, Any]:
        """Env i's hidden state: agent position (and heading), layout, objects, goal, cell IDs."""
        return self.rules.hidden_state(check_int("env index", i, 0, self.num_envs - 1))

    def render(self):
        """Draw env `render_index` (an RGB array in "rgb_array" mode, a window in "human")."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode= to make_vec")
            return None
        if self._needs_reset:
            raise ResetNeeded("call reset() before render()")
        if self._renderer is None:
            from envs.render import Renderer  # pygame loads only when something is drawn

            self._renderer = Renderer(self.render_mode, self.metadata["render_fps"])
        return self._renderer.draw(self.rules.scene(self.render_index))

    def close_extras(self, **kwargs: Any):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_renderer"] = None
        return state
