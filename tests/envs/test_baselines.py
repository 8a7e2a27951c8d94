"""The random and oracle baselines, and the GIF recorder."""

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import imageio.v3 as iio
import pytest

import envs
from envs.baselines import evaluate_baseline, main
from envs.record import main as record_main
from envs.record import record


@pytest.mark.parametrize("name", sorted(envs.ENV_IDS))
def test_oracle_beats_random_by_far(name):
    oracle = evaluate_baseline(name, "oracle", episodes=10, seed=0, num_envs=4)
    random = evaluate_baseline(name, "random", episodes=10, seed=0, num_envs=4)
    assert len(oracle["return"]) == len(random["return"]) == 10
    assert oracle["return"].mean() >= max(1.0, 5 * random["return"].mean())
    if name == "corridor":
        assert oracle["success"].mean() == 1.0 and oracle["length"].max() == 16
    if name == "tmaze":
        assert oracle["success"].mean() == 1.0 and (oracle["length"] == 11).all()


def test_baselines_are_reproducible_from_the_seed():
    first = evaluate_baseline("water_maze", "random", episodes=6, seed=4, num_envs=3)
    second = evaluate_baseline("water_maze", "random", episodes=6, seed=4, num_envs=3)
    assert (first["return"] == second["return"]).all()


def test_bad_names_are_rejected(capsys):
    with pytest.raises(ValueError, match="unknown policy 'greedy'"):
        evaluate_baseline("maze", "greedy", episodes=1, seed=0)
    with pytest.raises(SystemExit) as exit_info:
        main(["--env", "labyrinth"])
    assert exit_info.value.code == 2
    assert "unknown env 'labyrinth'" in capsys.readouterr().err


@pytest.mark.parametrize("command, argv", [(main, ["--seed", "-3"]), (record_main, ["corridor", "--seed", "-3"])], ids=["baselines", "record"])
def test_a_negative_seed_is_refused_naming_it(command, argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        command(argv)
    assert exit_info.value.code == 2
    assert "argument --seed: a seed is an integer >= 0, got -3" in capsys.readouterr().err


def test_record_writes_one_frame_per_step(tmp_path):
    frames, returns = record("corridor", "oracle", steps=20, seed=0)
    assert len(frames) == 21 and returns[0] == 1.0
    out = tmp_path / "corridor.gif"
    record_main(["corridor", "--steps", "5", "--out", str(out)])
    assert iio.imread(out).shape[0] == 6
