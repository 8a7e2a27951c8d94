"""Play an environment with the keyboard in a window: `python -m envs.play FeedbackRL/Maze-v0 [--seed S]`.

One key press is one step; nothing happens while no key is pressed. The keys are the env's
`key_actions` (pygame key names, the arrow keys for every env here); `r` starts a new episode,
Escape or closing the window quits. Each step prints the action, observation, reward and info,
and an episode's return is printed when it ends, before the next one starts.

The loop (`play`) takes any iterable of pygame events, so tests drive it with synthetic ones.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Iterator

import gymnasium as gym

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
import pygame  # noqa: E402  (after the variable that silences pygame's banner)

import envs  # noqa: E402  (registers the ids)
from envs.cli import env_name, env_seed  # noqa: E402

RESET_KEY = "r"
QUIT_KEY = "escape"


def key_map(key_actions: dict[str, int]) -> dict[int, int]:
    """pygame key code -> action, from an env's `key_actions` (pygame key name -> action)."""
    reserved = sorted({RESET_KEY, QUIT_KEY} & set(key_actions))
    if reserved:
        raise ValueError(f"key_actions uses {reserved}, which envs.play keeps for reset and quit")
    pygame.display.init()  # key names are looked up by SDL's video subsystem
    return {pygame.key.key_code(name): action for name, action in key_actions.items()}


def key_help(key_actions: dict[str, int]) -> str:
    keys = ", ".join(f"{name} -> action {action}" for name, action in key_actions.items())
    return f"keys: {keys}; {RESET_KEY}: new episode; {QUIT_KEY} or close the window: quit"


def window_events() -> Iterator[pygame.event.Event]:
    """The window's events, waiting for each (no busy loop: the env steps only on a key press)."""
    while True:
        yield pygame.event.wait()


def play(env: gym.Env, events: Iterable[pygame.event.Event], seed: int | None = None) -> list[float]:
    """Reset `env` (with `seed`), then step it once per mapped key press in `events`.

    Stops at Escape, a window close, or the end of `events`. Returns the returns of the episodes
    that ended (by termination or truncation; not those cut short by `r` or quitting).
    """
    actions = key_map(env.unwrapped.key_actions)
    reset_key = pygame.key.key_code(RESET_KEY)
    quit_key = pygame.key.key_code(QUIT_KEY)
    returns = []
    env.reset(seed=seed)
    episode_return = 0.0
    for event in events:
        if event.type == pygame.QUIT or (event.type == pygame.KEYDOWN and event.key == quit_key):
            break
        if event.type != pygame.KEYDOWN:
            continue
        if event.key == reset_key:
            print("new episode")
            env.reset()
            episode_return = 0.0
            continue
        action = actions.get(event.key)
        if action is None:
            continue
        obs, reward, terminated, truncated, info = env.step(action)
        episode_return += reward
        print(f"action {action}  obs {obs.tolist()}  reward {reward:g}  info {info}")
        if terminated or truncated:
            print(f"episode {'terminated' if terminated else 'truncated'}: return {episode_return:g}")
            returns.append(episode_return)
            env.reset()
            episode_return = 0.0
    return returns


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m envs.play", description="Play an env with the keyboard in a window.")
    parser.add_argument("env", type=env_name, help=f"a registered id or a short name: {', '.join(envs.ENV_IDS)}")
    parser.add_argument("--seed", type=env_seed, default=None, help="seed of the first episode, an integer >= 0")
    args = parser.parse_args(argv)
    env = gym.make(envs.env_id(args.env), render_mode="human")
    print(key_help(env.unwrapped.key_actions))
    try:
        play(env, window_events(), seed=args.seed)
    finally:
        env.close()


if __name__ == "__main__":
    main()
