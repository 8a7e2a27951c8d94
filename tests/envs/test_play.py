"""`python -m envs.play`: key mapping and the event loop, driven by synthetic pygame events."""

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import gymnasium as gym
import pygame
import pytest

import envs  # noqa: F401  (registers the ids)
from envs import play
from envs.maze import FORWARD, TURN_LEFT, TURN_RIGHT

SEED = 5


def key(code, type_=pygame.KEYDOWN):
    return pygame.event.Event(type_, key=code)


def corridor():
    """A corridor env (drawn to arrays: the loop does not care) and its first episode's hidden state."""
    env = gym.make("FeedbackRL/Corridor-v0", render_mode="rgb_array")
    env.reset(seed=SEED)
    return env, env.unwrapped.hidden_state()


def elapsed(env):
    return int(env.unwrapped.rules.elapsed[0])


def test_key_map_turns_key_names_into_codes():
    assert play.key_map(envs.maze.MazeEnv.key_actions) == {
        pygame.K_UP: FORWARD,
        pygame.K_LEFT: TURN_LEFT,
        pygame.K_RIGHT: TURN_RIGHT,
    }
    with pytest.raises(ValueError, match=r"key_actions uses \['r'\], which envs.play keeps"):
        play.key_map({"r": 0})


def test_one_step_per_mapped_key_press():
    env, _ = corridor()
    events = [key(pygame.K_RIGHT), key(pygame.K_RIGHT, pygame.KEYUP), key(pygame.K_a), key(pygame.K_RIGHT)]
    assert play.play(env, events, seed=SEED) == []
    assert elapsed(env) == 2 and env.unwrapped.hidden_state()["position"] == 2


def test_escape_and_window_close_stop_the_loop():
    for stop in [key(pygame.K_ESCAPE), pygame.event.Event(pygame.QUIT)]:
        env, _ = corridor()
        events = iter([key(pygame.K_RIGHT), stop, key(pygame.K_RIGHT), key(pygame.K_RIGHT)])
        play.play(env, events, seed=SEED)
        assert elapsed(env) == 1
        assert len(list(events)) == 2, "events after the stop are not read"


def test_r_starts_a_new_episode():
    env, _ = corridor()
    play.play(env, [key(pygame.K_RIGHT), key(pygame.K_RIGHT), key(pygame.K_r)], seed=SEED)
    assert elapsed(env) == 0 and env.unwrapped.hidden_state()["position"] == 0


def test_episode_end_prints_the_return_and_resets(capsys):
    env, hidden = corridor()
    length = env.unwrapped.rules.length
    door = pygame.K_UP if hidden["upper_door"] == hidden["cue"] else pygame.K_DOWN
    other = pygame.K_DOWN if door == pygame.K_UP else pygame.K_UP
    events = [key(pygame.K_RIGHT)] * (length - 1) + [key(door)]
    events += [key(pygame.K_RIGHT)] * (length - 1) + [key(other)]  # the next episode: either door ends it
    returns = play.play(env, events, seed=SEED)
    assert returns[0] == 1.0 and len(returns) == 2
    out = capsys.readouterr().out
    assert "reward 1  info {'success': True, 'arrived': True}" in out
    assert "episode terminated: return 1" in out
    assert elapsed(env) == 0, "reset after the episode ended"


def test_time_limit_ends_an_episode(capsys):
    env, _ = corridor()
    returns = play.play(env, [key(pygame.K_LEFT)] * env.spec.max_episode_steps, seed=SEED)
    assert returns == [0.0]
    assert "episode truncated: return 0" in capsys.readouterr().out


def test_main_plays_in_a_window(monkeypatch, capsys):
    events = [key(pygame.K_UP), key(pygame.K_LEFT), key(pygame.K_ESCAPE)]
    monkeypatch.setattr(play, "window_events", lambda: iter(events))
    play.main(["maze", "--seed", "3"])
    out = capsys.readouterr().out
    assert out.startswith("keys: up -> action 0, left -> action 1, right -> action 2; r: new episode")
    assert out.count("action ") == 3 + 2  # the help's three keys, two steps
    assert pygame.display.get_surface() is None, "the window closes with the env"


def test_main_rejects_unknown_envs(capsys):
    with pytest.raises(SystemExit) as exit_info:
        play.main(["Pong-v0"])
    assert exit_info.value.code == 2
    assert "unknown env 'Pong-v0'; choose from ['corridor'" in capsys.readouterr().err


@pytest.mark.parametrize("seed, shown", [("-1", "-1"), ("x", "'x'")])
def test_main_refuses_a_seed_that_is_not_an_integer_from_0(seed, shown, capsys):
    with pytest.raises(SystemExit) as exit_info:
        play.main(["maze", "--seed", seed])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in error
    assert f"argument --seed: a seed is an integer >= 0, got {shown}" in error
