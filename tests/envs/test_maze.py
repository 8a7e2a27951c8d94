"""Maze generation, turn and move semantics, rotated views, targets, and the oracle."""

from collections import deque

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envs  # noqa: F401  (registers the ids)
from envs import grid
from envs.maze import CELL_OBJECT, CELL_WALL, FORWARD, TURN_LEFT, TURN_RIGHT, MazeEasyRules, MazeRules
from envs.maze_layout import generate_walls, lattice
from envs.oracle import make_oracle, turn_distances

SIZE = 9


def neighbours(cell, size):
    r, c = divmod(cell, size)
    for dr, dc in grid.DIRECTIONS:
        yield (r + dr) * size + (c + dc)


def reachable(free, start, size):
    seen, todo = {start}, deque([start])
    while todo:
        for n in neighbours(todo.popleft(), size):
            if free[n] and n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


@pytest.mark.parametrize("size", [5, 9, 13])
def test_generated_mazes_are_connected_walled_and_without_dead_ends(size):
    u = np.random.default_rng(size).random((400, lattice(size).uniforms_needed))
    walls = generate_walls(size, u)
    for maze in walls:
        grid2d = maze.reshape(size, size)
        assert grid2d[0].all() and grid2d[-1].all() and grid2d[:, 0].all() and grid2d[:, -1].all()
        assert grid2d[::2, ::2].all(), "blocks at even (row, col) stay walls"
        assert not grid2d[1::2, 1::2].any(), "rooms are floor"
        free = ~maze
        cells = np.flatnonzero(free)
        assert reachable(free, cells[0], size) == set(cells)
        for cell in cells:
            assert sum(free[n] for n in neighbours(cell, size)) >= 2, f"dead end at {divmod(cell, size)}"
        # a spanning tree plus one opening per former dead end at most
        rooms = lattice(size).num_rooms
        assert 2 * rooms - 1 <= len(cells) <= 2 * rooms - 1 + rooms
    if size > 5:  # (a 2 x 2 lattice has a single maze without dead ends: every wall open)
        assert len({m.tobytes() for m in walls}) > 300, "mazes differ between draws"


def test_dead_end_openings_are_random_not_always_the_same_wall():
    """A dead end in a corner has one closed inner wall; elsewhere the choice must vary."""
    u = np.random.default_rng(0).random((2000, lattice(SIZE).uniforms_needed))
    walls = generate_walls(SIZE, u)
    free_counts = (~walls).sum(axis=1)
    assert free_counts.min() < free_counts.max()


@settings(derandomize=True, max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_objects_have_distinct_colours_on_distinct_free_cells(seed):
    env = gym.make("FeedbackRL/Maze-v0").unwrapped
    env.reset(seed=seed)
    state = env.hidden_state()
    objects = state["objects"]
    assert len(objects) == 8 and len(set(objects)) == 8
    assert all(not state["walls"][rc] for rc in objects)
    assert not state["walls"][state["position"]] and state["position"] not in objects
    assert 0 <= state["target"] < 8 and 0 <= state["heading"] < 4


def single_maze(rules_class=MazeRules, seed=0):
    rules = rules_class(num_envs=1)
    rules.rngs = [np.random.default_rng(seed)]
    rules.reset(np.array([0]))
    return rules


def open_cell_with_free_neighbour(rules, heading):
    """A free cell whose neighbour in `heading` is free, and one whose neighbour there is a wall."""
    free = rules.cells[0] != CELL_WALL
    delta = grid.flat_deltas(SIZE)[heading]
    cells = np.flatnonzero(free)
    return cells[free[cells + delta]][0], cells[~free[cells + delta]][0]


@pytest.mark.parametrize("heading", range(4))
def test_turns_change_heading_only_and_forward_moves_unless_walled(heading):
    rules = single_maze()
    open_cell, walled_cell = open_cell_with_free_neighbour(rules, heading)
    for action, new_heading in ((TURN_LEFT, (heading - 1) % 4), (TURN_RIGHT, (heading + 1) % 4)):
        rules.position[:], rules.heading[:] = open_cell, heading
        rules.step(np.array([action]))
        assert rules.position[0] == open_cell and rules.heading[0] == new_heading
    rules.position[:], rules.heading[:] = open_cell, heading
    rules.step(np.array([FORWARD]))
    assert rules.position[0] == open_cell + grid.flat_deltas(SIZE)[heading]
    rules.position[:], rules.heading[:] = walled_cell, heading
    rules.step(np.array([FORWARD]))
    assert rules.position[0] == walled_cell


@pytest.mark.parametrize("heading", range(4))
def test_view_is_rotated_so_that_heading_is_up(heading):
    rules = single_maze()
    rules.cells[0] = CELL_WALL
    centre = 4 * SIZE + 4
    ahead = centre + grid.flat_deltas(SIZE)[heading]
    left = centre + grid.flat_deltas(SIZE)[(heading - 1) % 4]
    rules.cells[0, centre] = 0
    rules.cells[0, ahead] = CELL_OBJECT + 3
    rules.cells[0, left] = CELL_OBJECT + 5
    rules.position[:], rules.heading[:] = centre, heading
    view = rules.observe()[0, :9].reshape(3, 3)
    assert view[0, 1] == CELL_OBJECT + 3, "the cell ahead is the top middle"
    assert view[1, 0] == CELL_OBJECT + 5, "the cell on the left is the middle left"
    assert view[1, 1] == 0 and (view == CELL_WALL).sum() == 6


@pytest.mark.parametrize("direction", range(4))
def test_easy_maze_moves_cardinally_and_view_is_north_up(direction):
    rules = single_maze(MazeEasyRules)
    open_cell, walled_cell = open_cell_with_free_neighbour(rules, direction)
    rules.position[:] = open_cell
    rules.step(np.array([direction]))
    assert rules.position[0] == open_cell + grid.flat_deltas(SIZE)[direction]
    rules.position[:] = walled_cell
    rules.step(np.array([direction]))
    assert rules.position[0] == walled_cell
    rules.cells[0] = CELL_WALL
    rules.cells[0, 40] = 0
    rules.cells[0, 40 - SIZE] = CELL_OBJECT  # north of the agent
    rules.position[:] = 40
    assert rules.observe()[0, 1] == CELL_OBJECT


def test_reaching_the_target_pays_once_and_draws_another_colour():
    rules = single_maze()
    for episode_step in range(50):
        target = rules.target[0]
        target_cell = np.flatnonzero(rules.cells[0] == CELL_OBJECT + target)[0]
        # stand next to the target, facing it
        for heading in range(4):
            here = target_cell - grid.flat_deltas(SIZE)[heading]
            if rules.cells[0, here] != CELL_WALL:
                break
        rules.position[:], rules.heading[:] = here, heading
        before = rules.targets_reached[0]
        reward, terminated, _ = rules.step(np.array([FORWARD]))
        assert reward[0] == 1.0 and not terminated[0]
        assert rules.targets_reached[0] == before + 1
        assert rules.target[0] != target and 0 <= rules.target[0] < 8
        reward, _, _ = rules.step(np.array([TURN_LEFT]))  # standing on the old target pays nothing
        assert reward[0] == 0.0
    assert len(set(rules.info()["targets_reached"])) == 1


def brute_force_turn_distance(free, goal, size):
    """Breadth-first search backwards over (cell, heading) states, one state at a time."""
    dist = {(goal, h): 0 for h in range(4)}
    todo = deque(dist)
    deltas = grid.flat_deltas(size)
    while todo:
        cell, h = todo.popleft()
        # predecessors: turned into h from h±1 in place, or moved forward from cell - delta[h]
        preds = [(cell, (h + 1) % 4), (cell, (h - 1) % 4)]
        if free[cell - deltas[h]]:
            preds.append((cell - deltas[h], h))
        for p in preds:
            if p not in dist:
                dist[p] = dist[(cell, h)] + 1
                todo.append(p)
    return dist


def test_turn_distances_match_brute_force_search():
    u = np.random.default_rng(5).random((20, lattice(SIZE).uniforms_needed))
    free = ~generate_walls(SIZE, u)
    goals = np.array([np.flatnonzero(f)[i % 5] for i, f in enumerate(free)])
    tables = turn_distances(free, goals, SIZE)
    for f, goal, table in zip(free, goals, tables):
        expected = brute_force_turn_distance(f, goal, SIZE)
        for (cell, h), d in expected.items():
            assert table[cell, h] == d


@pytest.mark.parametrize("env_id", ["FeedbackRL/Maze-v0", "FeedbackRL/MazeEasy-v0"])
def test_oracle_follows_shortest_paths(env_id):
    """Every oracle step brings the agent one step closer; rewards come at distance zero."""
    env = gym.make_vec(env_id, num_envs=8)
    env.reset(seed=2)
    oracle = make_oracle(env)
    total = np.zeros(8)
    for _ in range(199):
        before = oracle.steps_to_target()
        _, reward, _, _, _ = env.step(oracle())
        total += reward
        assert np.all((reward == 1.0) == (before == 1))
    assert total.min() >= 10, total
