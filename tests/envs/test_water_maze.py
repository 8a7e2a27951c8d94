"""Water maze: moves, the goal view, teleports after the goal, per-episode cell IDs."""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs import grid
from envs.water_maze import NOT_IN_VIEW, WaterMazeRules


def water_maze(seed=0, size=15, num_envs=1):
    rules = WaterMazeRules(num_envs=num_envs, size=size)
    rules.rngs = [np.random.default_rng(seed + i) for i in range(num_envs)]
    rules.reset(np.arange(num_envs))
    return rules


def place(rules, agent, goal):
    (rules.row[:], rules.col[:]), (rules.goal_row[:], rules.goal_col[:]) = agent, goal


@pytest.mark.parametrize("action", range(4))
def test_moves_are_cardinal_and_stop_at_the_border(action):
    rules = water_maze()
    place(rules, (7, 7), (0, 0))
    rules.step(np.array([action]))
    assert (rules.row[0], rules.col[0]) == (7 + grid.DIRECTIONS[action][0], 7 + grid.DIRECTIONS[action][1])
    edge = {grid.UP: (0, 5), grid.RIGHT: (5, 14), grid.DOWN: (14, 5), grid.LEFT: (5, 0)}[action]
    place(rules, edge, (9, 9))
    rules.step(np.array([action]))
    assert (rules.row[0], rules.col[0]) == edge


def test_observation_is_cell_ids_and_goal_place_in_the_3x3_area():
    rules = water_maze()
    ids = rules.cell_ids[0].reshape(15, 15)
    for goal, expected in (((6, 6), 0), ((6, 8), 2), ((7, 8), 5), ((8, 7), 7), ((9, 7), NOT_IN_VIEW), ((0, 0), NOT_IN_VIEW)):
        place(rules, (7, 7), goal)
        assert rules.observe()[0].tolist() == [ids[7, 7], ids[goal], expected]


def test_reaching_the_goal_pays_and_teleports_elsewhere():
    rules = water_maze(num_envs=64)
    place(rules, (3, 4), (3, 5))
    landings = set()
    for k in range(5):
        reward, terminated, _ = rules.step(np.full(64, grid.RIGHT))
        assert (reward == 1.0).all() and not terminated.any()
        assert (rules.goals_reached == k + 1).all()
        here = list(zip(rules.row.tolist(), rules.col.tolist()))
        assert (3, 5) not in here
        landings.update(here)
        place(rules, (3, 4), (3, 5))
    assert len(landings) > 100, "teleports land on many different cells"


def test_cell_ids_are_a_fresh_permutation_each_episode_and_goal_differs():
    env = gym.make("FeedbackRL/WaterMaze-v0").unwrapped
    env.reset(seed=0)
    first = env.hidden_state()
    env.reset()
    second = env.hidden_state()
    for state in (first, second):
        assert sorted(state["cell_ids"].ravel().tolist()) == list(range(225))
        assert state["position"] != state["goal"]
    assert not np.array_equal(first["cell_ids"], second["cell_ids"])
