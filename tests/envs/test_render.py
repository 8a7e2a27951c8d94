"""The renderer: frame size and content for every env, human mode without a display, tile caching,
the vector env's render_index, pickling after rendering."""

import os
import pickle

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import gymnasium as gym
import numpy as np
import pygame
import pytest

import envs
from envs import render
from envs.maze import FORWARD, TURN_LEFT
from envs.render import AGENT_COLOUR, COLOUR_RGB, FLOOR_COLOUR, GOAL_COLOUR, STATUS_COLOUR, WALL_COLOUR, Renderer
from envs.scene import DOOR, FLOOR, GOAL, OBJECT, WALL, Scene

IDS = sorted(envs.ENV_IDS.values())
GRID_SHAPES = {
    "FeedbackRL/Corridor-v0": (3, 18),  # length 16 + two end walls
    "FeedbackRL/Maze-v0": (9, 9),
    "FeedbackRL/MazeEasy-v0": (9, 9),
    "FeedbackRL/MemoryLength-v0": (5, 14),  # context, query, a track of steps 0 .. 11; walled all round
    "FeedbackRL/PassiveTMaze-v0": (3, 13),  # cells x = 0 .. 10 + two end walls
    "FeedbackRL/WaterMaze-v0": (15, 15),
}
SEED = 7
PX = 32  # the renderer's default cell size


def make(env_id, render_mode="rgb_array"):
    env = gym.make(env_id, render_mode=render_mode)
    env.reset(seed=SEED)
    return env


def scene_of(env):
    return env.unwrapped.rules.scene(0)


def centre(frame, cell):
    """The RGB of the centre pixel of grid cell (row, col)."""
    row, col = cell
    return tuple(int(v) for v in frame[row * PX + PX // 2, col * PX + PX // 2])


def expected_centre(code):
    """What the centre of an unhighlighted cell with this tile code shows."""
    if code == FLOOR:
        return FLOOR_COLOUR
    if code == WALL:
        return WALL_COLOUR
    if code == GOAL:
        return GOAL_COLOUR
    return COLOUR_RGB[code - OBJECT] if code < DOOR else COLOUR_RGB[code - DOOR]


def step_until_moved(env):
    """Step with a fixed action cycle until the agent changes cell.

    Returns (frame before, frame after, cell before, cell after) of the step that moved it.
    """
    if env.spec.id == "FeedbackRL/Maze-v0":
        cycle = [FORWARD, TURN_LEFT]  # every floor cell has an open side; turning finds it
    else:
        cycle = list(range(env.action_space.n))
    for t in range(16):
        before, cell = env.render(), scene_of(env).agent
        env.step(cycle[t % len(cycle)])
        if scene_of(env).agent != cell:
            return before, env.render(), cell, scene_of(env).agent
    raise AssertionError(f"{env.spec.id}: the agent did not move in 16 steps")


@pytest.mark.parametrize("env_id", IDS)
def test_rgb_array_frame_is_grid_plus_status_bar(env_id):
    env = make(env_id)
    frame = env.render()
    renderer = env.unwrapped._renderer
    rows, cols = GRID_SHAPES[env_id]
    assert scene_of(env).tiles.shape == (rows, cols)
    assert renderer.status_px > 0
    assert frame.dtype == np.uint8
    assert frame.shape == (rows * PX + renderer.status_px, cols * PX, 3)
    assert renderer.frame_size((rows, cols)) == frame.shape[:2]


@pytest.mark.parametrize("env_id", IDS)
def test_every_cell_is_drawn_where_the_scene_puts_it(env_id):
    env = make(env_id)
    env.step(0)
    frame, scene = env.render(), scene_of(env)
    view = set(scene.view)
    assert centre(frame, scene.agent) == AGENT_COLOUR
    codes = set()
    for (row, col), code in np.ndenumerate(scene.tiles):
        if (row, col) == scene.agent:
            continue
        plain = expected_centre(code)
        if (row, col) in view:  # tinted brighter
            assert centre(frame, (row, col)) != plain and sum(centre(frame, (row, col))) > sum(plain)
        else:
            assert centre(frame, (row, col)) == plain, f"cell {(row, col)} with tile {code}"
            codes.add(int(code))
    if env_id == "FeedbackRL/WaterMaze-v0":
        assert FLOOR in codes
    else:
        assert WALL in codes and any(code >= OBJECT for code in codes), f"{env_id}: walls and objects drawn"


@pytest.mark.parametrize("env_id", IDS)
def test_frame_follows_the_agent(env_id):
    env = make(env_id)
    before, after, old, new = step_until_moved(env)
    assert not np.array_equal(before, after)
    assert centre(before, old) == AGENT_COLOUR
    assert centre(after, new) == AGENT_COLOUR
    assert centre(after, old) != AGENT_COLOUR


@pytest.mark.parametrize("env_id", IDS)
def test_human_mode_without_display_shows_the_rgb_frame(env_id):
    env = make(env_id, render_mode="human")  # reset draws into a window
    assert env.render() is None
    env.step(0)  # and so does every step
    window = pygame.display.get_surface()
    twin = make(env_id)  # the same state, drawn to an array
    twin.step(0)
    expected = twin.render()
    assert window.get_size() == (expected.shape[1], expected.shape[0])
    shown = pygame.surfarray.array3d(window).transpose(1, 0, 2)
    np.testing.assert_array_equal(shown, expected)
    env.close()
    assert pygame.display.get_surface() is None


def test_tiles_are_drawn_once_and_cached(monkeypatch):
    made = []
    make_tile = render.make_tile
    monkeypatch.setattr(render, "make_tile", lambda code, px: made.append(code) or make_tile(code, px))
    env = make("FeedbackRL/Maze-v0")
    env.render()
    codes = set(np.unique(scene_of(env).tiles).tolist())
    renderer = env.unwrapped._renderer
    assert sorted(made) == sorted(codes) == sorted(renderer.tiles)  # floor, wall, 8 objects: once each
    cached = dict(renderer.tiles)
    for action in [0, 1, 0, 2, 0]:
        env.step(action)
        env.render()
    assert sorted(made) == sorted(codes)
    assert all(renderer.tiles[code] is surface for code, surface in cached.items())


def test_frame_and_window_follow_the_grid_shape():
    small = Scene(np.zeros((2, 3), dtype=np.int64), (0, 0), None, [(0, 0)], None, "small")
    large = Scene(np.full((4, 5), WALL), (1, 1), 2, [(1, 1)], 3, "large")
    renderer = Renderer("rgb_array", fps=8, cell_px=8)
    for scene in [small, large, small]:
        assert renderer.draw(scene).shape == (*renderer.frame_size(scene.tiles.shape), 3)
    window = Renderer("human", fps=1000, cell_px=8)
    for scene in [small, large]:
        assert window.draw(scene) is None
        height, width = window.frame_size(scene.tiles.shape)
        assert pygame.display.get_surface().get_size() == (width, height)
    window.close()


def test_agent_triangle_points_along_heading():
    """Opaque pixels of the agent sprite: fewer on the side of the tip than on the side of the base."""
    for heading in range(4):
        alpha = pygame.surfarray.array_alpha(render.make_agent(heading, PX)).T > 0  # (y, x)
        top, bottom = alpha[: PX // 2].sum(), alpha[PX // 2 :].sum()
        left, right = alpha[:, : PX // 2].sum(), alpha[:, PX // 2 :].sum()
        tip_side, base_side = [(top, bottom), (right, left), (bottom, top), (left, right)][heading]
        assert tip_side < base_side, f"heading {heading}"


def test_status_bar_shows_target_swatch_and_caption():
    env = make("FeedbackRL/Maze-v0")
    frame, scene = env.render(), scene_of(env)
    bar = frame[scene.tiles.shape[0] * PX :]  # (status_px, W, 3)
    swatch = (bar == COLOUR_RGB[scene.target]).all(axis=-1).sum()
    assert swatch >= 100, "a swatch of the target colour"
    assert (bar != STATUS_COLOUR).any(axis=-1).sum() > swatch + 100, "and text"


def test_without_fonts_the_status_bar_is_blank(monkeypatch):
    def no_font(*args):
        raise pygame.error("no fonts here")

    monkeypatch.setattr(pygame.font, "Font", no_font)
    env = make("FeedbackRL/Corridor-v0")
    frame = env.render()
    bar = frame[GRID_SHAPES["FeedbackRL/Corridor-v0"][0] * PX :]
    assert (bar == STATUS_COLOUR).all()


@pytest.mark.parametrize("env_id", IDS)
def test_vector_env_renders_env_render_index(env_id):
    vec = gym.make_vec(env_id, num_envs=4, render_mode="rgb_array", render_index=2)
    vec.reset(seed=SEED)
    single = gym.make(env_id, render_mode="rgb_array")
    single.reset(seed=SEED + 2)  # env i of a vector env seeded s follows a single env seeded s + i
    np.testing.assert_array_equal(vec.render(), single.render())
    actions = [1, 2, 0, 3, 0, 1, 0]
    for t, action in enumerate(actions):
        action %= single.action_space.n
        batch = np.full(4, (t + 1) % single.action_space.n)
        batch[2] = action
        vec.step(batch)
        single.step(action)
    np.testing.assert_array_equal(vec.render(), single.render())
    if env_id != "FeedbackRL/Corridor-v0":  # corridors may look alike; mazes and goals differ
        first = gym.make(env_id, render_mode="rgb_array")
        first.reset(seed=SEED)
        assert not np.array_equal(vec.render(), first.render())


@pytest.mark.parametrize("render_mode", ["rgb_array", "human"])
def test_pickling_an_env_that_rendered(render_mode):
    env = make("FeedbackRL/Maze-v0", render_mode=render_mode)
    env.render()
    clone = pickle.loads(pickle.dumps(env))
    assert clone.unwrapped._renderer is None
    assert env.unwrapped._renderer is not None, "pickling leaves the original's renderer alone"
    clone.step(0)
    env.step(0)
    if render_mode == "rgb_array":
        np.testing.assert_array_equal(clone.render(), env.render())
    else:
        assert clone.render() is None
    env.close()
    clone.close()


def test_pickling_a_vector_env_that_rendered():
    vec = gym.make_vec("FeedbackRL/WaterMaze-v0", num_envs=3, render_mode="rgb_array", render_index=1)
    vec.reset(seed=SEED)
    frame = vec.render()
    clone = pickle.loads(pickle.dumps(vec))
    np.testing.assert_array_equal(clone.render(), frame)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="unknown render_mode 'ansi'"):
        Renderer("ansi", fps=8)
    scene = Scene(np.array([[99]]), (0, 0), None, [], None, "")
    with pytest.raises(ValueError, match="unknown tile code 99"):
        Renderer("rgb_array", fps=8).draw(scene)
