"""Passive T-maze: moves, what the agent sees when, the penalty and goal rewards, episode length,
the oracle, and a scalar restatement of Ni et al.'s rules checked against the batched env; the
action penalty (AMAGO's) and expose_goal (Ni et al.'s) options."""

import os
import re

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envs  # noqa: F401  (registers the ids)
from envs.baselines import evaluate_baseline, run_episodes
from envs.tmaze import DOWN, LEFT, RIGHT, UP

TMAZE = "FeedbackRL/PassiveTMaze-v0"


def tmaze(seed, length=4, **kwargs):
    env = gym.make(TMAZE, length=length, **kwargs).unwrapped
    obs, info = env.reset(seed=seed)
    return env, obs, info


def goal_action(env):
    return UP if env.hidden_state()["goal"] == 1 else DOWN


def run(env, actions):
    """(observations, rewards, terminated, truncated) after each of `actions`."""
    steps = [env.step(a) for a in actions]
    return [s[0].tolist() for s in steps], [s[1] for s in steps], [s[2] for s in steps], [s[3] for s in steps]


@pytest.mark.parametrize("seed", range(6))
def test_the_goal_shows_at_the_start_only_and_the_corridor_looks_the_same(seed):
    env, obs, info = tmaze(seed)
    goal = env.hidden_state()["goal"]
    assert obs.tolist() == [0, 1 if goal == 1 else 2] and info == {"success": False, "arrived": False}
    observations, *_ = run(env, [LEFT, UP, DOWN, RIGHT, RIGHT, LEFT])  # the first three stay at x = 0
    assert observations == [[0, 0]] * 6
    assert env.hidden_state()["x"] == 1


def test_moves_follow_the_t():
    env, _, _ = tmaze(0)
    for action in (LEFT, UP, DOWN):  # walls around the start
        env.step(action)
        assert (env.hidden_state()["x"], env.hidden_state()["y"]) == (0, 0)
    env, _, _ = tmaze(0, length=2)
    observations, *_ = run(env, [RIGHT, UP, RIGHT])
    assert observations == [[0, 0], [0, 0], [1, 0]]  # the junction
    env, _, _ = tmaze(0, length=2)
    observations, _, terminated, _ = run(env, [RIGHT, RIGHT, UP])
    assert observations[-1] == [1, 1] and terminated == [False, False, True]
    env, _, _ = tmaze(0, length=2)
    observations, *_ = run(env, [RIGHT, RIGHT, DOWN])
    assert observations[-1] == [1, 2] and env.hidden_state()["y"] == -1


def test_from_a_candidate_only_the_way_back_is_open():
    env, _, _ = tmaze(0, length=1)
    env.step(RIGHT)
    env.step(UP)  # the episode has ended; stepping on without a reset still shows the walls
    for action in (RIGHT, LEFT, UP):
        env.step(action)
        assert (env.hidden_state()["x"], env.hidden_state()["y"]) == (1, 1)
    env.step(DOWN)
    assert (env.hidden_state()["x"], env.hidden_state()["y"]) == (1, 0)


@pytest.mark.parametrize("seed", range(4))
def test_the_goal_pays_one_the_other_side_and_the_junction_pay_nothing(seed):
    for last, paid in [("goal", 1.0), ("other", 0.0), ("stay", 0.0)]:
        env, _, _ = tmaze(seed)
        up_or_down = goal_action(env)
        action = {"goal": up_or_down, "other": UP + DOWN - up_or_down, "stay": LEFT}[last]
        _, rewards, terminated, truncated = run(env, [RIGHT] * 4 + [action])
        assert rewards == [0.0] * 4 + [paid]
        assert terminated == [False] * 4 + [True] and truncated == [False] * 5
        assert env.rules.info()["success"][0] == (last == "goal")
        assert env.rules.info()["arrived"][0] == (last != "stay")  # on a candidate, either one


def test_the_penalty_is_minus_one_over_length_for_every_step_behind_schedule():
    """One lost step (a move into the wall at step 1) costs -1/L on every step up to L, not once."""
    env, _, _ = tmaze(0, length=4)
    _, rewards, _, _ = run(env, [LEFT, RIGHT, RIGHT, RIGHT, goal_action(env)])
    assert rewards == [-0.25] * 4 + [0.0]  # still one cell short at step 5: no junction, no goal
    env, _, _ = tmaze(0, length=4)
    _, rewards, _, _ = run(env, [RIGHT, UP, RIGHT, RIGHT, RIGHT])
    assert rewards == [0.0, -0.25, -0.25, -0.25, 0.0]  # the last step has no penalty
    env, _, _ = tmaze(0, length=4)
    _, rewards, _, _ = run(env, [LEFT] * 5)
    assert sum(rewards) == -1.0  # the worst return


def test_the_action_penalty_charges_each_step_not_right_once_and_nothing_for_lagging():
    """The schedule penalty's sequences above, under penalty="action": one lost step costs -1/L once."""
    env, _, _ = tmaze(0, length=4, penalty="action")
    _, rewards, _, _ = run(env, [LEFT, RIGHT, RIGHT, RIGHT, goal_action(env)])
    assert rewards == [-0.25, 0.0, 0.0, 0.0, 0.0]  # behind schedule from step 1 on, charged at step 1 only
    env, _, _ = tmaze(0, length=4, penalty="action")
    _, rewards, _, _ = run(env, [RIGHT, UP, DOWN, RIGHT, LEFT])
    assert rewards == [0.0, -0.25, -0.25, 0.0, 0.0]  # the last step has no penalty
    env, _, _ = tmaze(0, length=4, penalty="action")
    _, rewards, _, _ = run(env, [RIGHT, RIGHT, RIGHT, UP, RIGHT])
    assert rewards == [0.0, 0.0, 0.0, -0.25, 0.0]  # a move into the wall at step L is charged too
    env, _, _ = tmaze(0, length=4, penalty="action")
    _, rewards, _, _ = run(env, [LEFT] * 5)
    assert sum(rewards) == -1.0  # the worst return, as with the schedule


def reference_episode(length, goal, actions, penalty="schedule"):
    """Ni et al.'s passive T-maze (envs/tmaze.py of Memory-RL at c9b8b398, TMazeClassicPassive
    with penalty -1/L), restated one step at a time: rewards and done flags. penalty="action":
    AMAGO's TMazeAlt, which charges -1/L for an action other than right instead."""
    cells = {(x, 0) for x in range(length + 1)} | {(length, 1), (length, -1)}
    moves = [(1, 0), (0, 1), (-1, 0), (0, -1)]
    x, y, out = 0, 0, []
    for t, action in enumerate(actions, start=1):
        if (x + moves[action][0], y + moves[action][1]) in cells:
            x, y = x + moves[action][0], y + moves[action][1]
        done = t >= length + 1
        charged = x < t if penalty == "schedule" else action != 0
        out.append((float(y == goal) if done else (-1.0 / length if charged else 0.0), done))
        if done:
            break
    return out


@settings(derandomize=True, max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), length=st.integers(1, 12), actions=st.lists(st.integers(0, 3), min_size=14, max_size=14),
       penalty=st.sampled_from([None, "schedule", "action"]))
def test_rewards_and_ends_follow_ni_et_al_and_the_episode_is_exactly_length_plus_one(seed, length, actions, penalty):
    env, _, _ = tmaze(seed, length=length, **({} if penalty is None else {"penalty": penalty}))
    goal = env.hidden_state()["goal"]
    ours = []
    for a in actions[: length + 1]:
        _, reward, terminated, truncated, _ = env.step(a)
        ours.append((reward, terminated))
        assert not truncated
    assert ours == reference_episode(length, goal, actions, penalty or "schedule")
    assert [done for _, done in ours] == [False] * length + [True]


def test_the_goal_side_is_up_or_down_by_the_seed():
    sides = [tmaze(seed)[0].hidden_state()["goal"] for seed in range(200)]
    assert set(sides) == {1, -1} and 80 < sides.count(1) < 120


@pytest.mark.parametrize("options", [{}, {"penalty": "action"}, {"expose_goal": True}, {"penalty": "action", "expose_goal": True}])
@pytest.mark.parametrize("length", [1, 2, 10, 50])
def test_oracle_gets_one_without_penalty_in_length_plus_one_steps(length, options):
    oracle = evaluate_baseline("tmaze", "oracle", episodes=16, seed=0, num_envs=4, length=length, **options)
    assert (oracle["return"] == 1.0).all() and (oracle["success"] == 1.0).all()
    assert (oracle["length"] == length + 1).all()


def test_walking_right_then_guessing_succeeds_half_the_time():
    """The best a policy without memory can do: right to the junction, then a coin flip."""
    env = gym.make_vec(TMAZE, num_envs=50, length=5, autoreset_mode="SameStep")
    env.reset(seed=0)
    rules, rng = env.unwrapped.rules, np.random.default_rng(0)

    def act():
        return np.where(rules.x < rules.length, RIGHT, rng.choice([UP, DOWN], size=50))

    results = run_episodes(env, act, episodes=2000, keys=["success"])
    assert abs(results["success"].mean() - 0.5) < 0.04
    assert set(results["return"]) == {0.0, 1.0}


def test_a_uniformly_random_policy_rarely_reaches_the_junction():
    """Right on each of the first L steps has probability 4**-L: for L = 1, 1/4 then 1/4 to pick the goal."""
    random = evaluate_baseline("tmaze", "random", episodes=2000, seed=0, num_envs=50, length=1)
    assert abs(random["success"].mean() - 1 / 16) < 0.02
    assert (random["length"] == 2).all() and random["return"].min() >= -1.0


def test_length_sets_the_episode_through_make_and_make_vec():
    env = gym.make(TMAZE, length=50)  # no registered limit to cut it at the default's 11
    env.reset(seed=0)
    ends = [env.step(RIGHT)[2] for _ in range(51)]
    assert ends == [False] * 50 + [True]
    vector = gym.make_vec(TMAZE, num_envs=2, length=50)
    vector.reset(seed=0)
    ends = [vector.step(np.full(2, RIGHT))[2].all() for _ in range(51)]
    assert ends == [False] * 50 + [True]


def test_no_time_limit_by_default_a_longer_one_is_never_reached_a_shorter_one_truncates():
    for limit, ends in [(None, (True, False)), (40, (True, False)), (4, (True, True)), (2, (False, True))]:
        vector = gym.make_vec(TMAZE, num_envs=1, length=3, max_episode_steps=limit)
        vector.reset(seed=0)
        flags = [vector.step(np.array([RIGHT]))[2:4] for _ in range(min(limit or 4, 4))]
        assert (bool(flags[-1][0][0]), bool(flags[-1][1][0])) == ends


def test_vector_env_i_follows_the_single_env_seeded_s_plus_i():
    vector = gym.make_vec(TMAZE, num_envs=3, length=3, autoreset_mode="SameStep")
    obs, _ = vector.reset(seed=10)
    singles = [gym.make(TMAZE, length=3) for _ in range(3)]
    assert np.array_equal(obs, np.stack([env.reset(seed=10 + i)[0] for i, env in enumerate(singles)]))
    rng = np.random.default_rng(0)
    for _ in range(30):  # about 8 episodes each
        actions = rng.integers(0, 4, 3)
        obs, reward, terminated, _, _ = vector.step(actions)
        for i, env in enumerate(singles):
            single_obs, single_reward, single_terminated, _, _ = env.step(int(actions[i]))
            if single_terminated:
                single_obs, _ = env.reset()  # SameStep: the vector env shows the next episode's start
            assert np.array_equal(obs[i], single_obs)
            assert (reward[i], terminated[i]) == (single_reward, single_terminated)


def test_a_length_1000_corridor_renders_shortened():
    env, _, _ = tmaze(0, length=1000, render_mode="rgb_array")
    frame = env.render()
    assert frame.shape == (3 * 32 + 48, 34 * 32, 3)  # 32 columns of corridor + two walls
    scene = env.rules.scene(0)
    for _ in range(1000):
        env.step(RIGHT)
    assert env.rules.scene(0).agent == (1, 32) and scene.agent == (1, 1)


@pytest.mark.parametrize("length", [0, -3, 2.5, "10", True, None])
def test_bad_lengths_are_refused_naming_the_value(length):
    with pytest.raises(ValueError, match=re.escape(f"length must be an integer >= 1, got {length!r}")):
        gym.make(TMAZE, length=length)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), length=st.integers(1, 6), actions=st.lists(st.integers(0, 3), min_size=20, max_size=20))
def test_expose_goal_shows_the_side_at_every_step_and_changes_nothing_else(seed, length, actions):
    plain, plain_obs, _ = tmaze(seed, length=length)
    exposed, exposed_obs, _ = tmaze(seed, length=length, expose_goal=True)

    def check():  # the plain signal or, where it would be 0 off a candidate, the goal side
        hidden = plain.hidden_state()
        assert exposed_obs[0] == plain_obs[0] and plain_obs[1] in (0, exposed_obs[1])
        assert exposed_obs[1] == (plain_obs[1] if hidden["y"] != 0 else hidden["goal"] % 3)

    check()
    for action in actions:
        plain_obs, *plain_rest = plain.step(action)
        exposed_obs, *exposed_rest = exposed.step(action)
        assert exposed_rest == plain_rest and exposed.hidden_state() == plain.hidden_state()
        check()  # the last observation too, on a candidate or not
        if plain_rest[1]:  # terminated: both start the same next episode
            (plain_obs, _), (exposed_obs, _) = plain.reset(), exposed.reset()
            check()


def test_with_the_goal_exposed_a_policy_of_the_current_observation_alone_gets_one():
    """What an MLP can learn: right until the junction, then the side the signal shows."""
    env = gym.make_vec(TMAZE, num_envs=8, length=6, expose_goal=True, autoreset_mode="SameStep")
    obs, _ = env.reset(seed=0)
    returns, running = [], np.zeros(8)
    for _ in range(7 * 4):
        actions = np.where(obs[:, 0] == 0, RIGHT, np.where(obs[:, 1] == 1, UP, DOWN))
        obs, reward, terminated, _, _ = env.step(actions)
        running += reward
        returns += running[terminated].tolist()
        running[terminated] = 0.0
    assert returns == [1.0] * 32


def test_the_cue_is_highlighted_while_it_is_seen():
    for expose_goal, seen in [(False, [True, False, False]), (True, [True, True, True])]:
        env, _, _ = tmaze(0, length=3, expose_goal=expose_goal)
        cue = (1 - env.hidden_state()["goal"], 1)
        views = []
        for _ in range(3):
            views.append(cue in env.rules.scene(0).view)
            env.step(RIGHT)
        assert views == seen


@pytest.mark.parametrize("options, message", [
    ({"penalty": "lag"}, "penalty must be one of ['schedule', 'action'], got 'lag'"),
    ({"penalty": None}, "penalty must be one of ['schedule', 'action'], got None"),
    ({"expose_goal": "yes"}, "expose_goal must be True or False, got 'yes'"),
    ({"expose_goal": 1}, "expose_goal must be True or False, got 1"),
])
def test_bad_options_are_refused_naming_the_value(options, message):
    for make in (gym.make, lambda env_id, **kwargs: gym.make_vec(env_id, num_envs=2, **kwargs)):
        with pytest.raises(ValueError, match=re.escape(message)):
            make(TMAZE, **options)
