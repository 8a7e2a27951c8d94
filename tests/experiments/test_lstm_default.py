"""The LSTM default's rule (experiments/lstm_default.py): each measure's verdict from its intervals,
a lower bound that could still rise leaves a measure open, a tie keeps PyTorch's."""

import json

import pytest

from experiments import lstm_default


def mazes_json(returns_by_env):
    """A mazes.py summary with the LSTM's row per env: evaluation returns per seed and an interval."""
    envs = {env: {"cores": {"lstm": {"per_seed": [{"seed": seed, "eval": {"return": value}} for seed, value in enumerate(returns)],
                                     "eval_return": {"iqm": sum(returns) / len(returns), "ci_low": min(returns), "ci_high": max(returns)}}}}
            for env, returns in returns_by_env.items()}
    return {"envs": envs}


def recall_cells(solved_by_length):
    """frames_to_solve.py's cells: {length: [solved per seed]}."""
    return {str(length): {"per_seed": [{"seed": seed, "solved": solved, "frames_to_solve": 1000 if solved else None}
                                       for seed, solved in enumerate(runs)]} for length, runs in solved_by_length.items()}


def write(tmp_path, pytorch, chrono, recall):
    (tmp_path / "mazes").mkdir()
    (tmp_path / "memory_length").mkdir()
    (tmp_path / "mazes" / "lstm_default_pytorch.json").write_text(json.dumps(mazes_json(pytorch)))
    (tmp_path / "mazes" / "lstm_default_chrono.json").write_text(json.dumps(mazes_json(chrono)))
    (tmp_path / "memory_length" / "frames_to_solve.json").write_text(json.dumps({"models": recall}))
    lstm_default.main(["--out", str(tmp_path / "memory_length")])
    return json.loads((tmp_path / "memory_length" / "lstm_default.json").read_text())


def test_a_seeds_reach_ends_at_its_first_failure_and_stays_open_while_it_has_none():
    cells = recall_cells({8: [True, True, False], 16: [True, False, True], 32: [True, False, True]})
    assert lstm_default.seed_reaches(cells) == ([32, 8, 0], [True, False, False])


def test_each_verdict_comes_from_the_intervals_and_a_tie_keeps_pytorchs(tmp_path):
    pytorch = {"corridor": [0.9, 1.0, 0.95], "maze": [6.0, 6.2, 6.1], "maze_easy": [3.0, 3.1, 3.2], "water_maze": [1.0, 1.2, 1.1]}
    chrono = {"corridor": [0.95, 1.0, 0.9], "maze": [6.3, 6.5, 6.4], "maze_easy": [2.0, 2.2, 2.1], "water_maze": [0.3, 0.7, 0.4]}
    recall = {"lstm": {"lengths": recall_cells({16: [True] * 3, 32: [False] * 3})},
              "lstm-chrono": {"lengths": recall_cells({16: [True] * 3, 32: [True] * 3})}}
    answer = write(tmp_path, pytorch, chrono, recall)
    verdicts = {name: measure["better"] for name, measure in answer["measures"].items()}
    # the maze and recall go to chrono (recall: a lower bound above, so it can only rise), two to PyTorch's, the corridor overlaps
    assert verdicts == {"corridor": "tie", "maze": "chrono", "maze_easy": "pytorch", "water_maze": "pytorch", "recall": "chrono"}
    assert answer["answer"] == {"wins": {"pytorch": 2, "chrono": 2}, "open_or_not_run": 0, "choice": "pytorch"}
    assert answer["measures"]["recall"]["chrono"]["per_seed"] == [32, 32, 32] and answer["measures"]["recall"]["chrono"]["lower_bound"]
    table = (tmp_path / "memory_length" / "lstm_default.md").read_text()
    assert "| recall | 16 [16, 16] (16, 16, 16) | >= 32 [32, 32] (32, 32, 32) | chrono |" in table
    assert "The rule's answer: pytorch" in table


@pytest.mark.parametrize(("chrono_reach", "verdict"), [(32, "open"), (8, "pytorch")])
def test_a_lower_bound_below_the_other_side_leaves_the_measure_open_until_it_fails(tmp_path, chrono_reach, verdict):
    """PyTorch's reaches 16 in every seed and fails at 32; chrono's seeds have solved all they ran
    (to 8, so open: they may yet pass 16) or failed at 16 (reach 8: PyTorch's is better)."""
    lengths = {8: [True] * 3, 16: [True] * 3, 32: [False] * 3}
    chrono_lengths = {8: [True] * 3} if chrono_reach == 32 else {8: [True] * 3, 16: [False] * 3}
    recall = {"lstm": {"lengths": recall_cells(lengths)}, "lstm-chrono": {"lengths": recall_cells(chrono_lengths)}}
    envs = {env: [1.0, 1.1, 1.2] for env in lstm_default.ENVS}
    answer = write(tmp_path, envs, envs, recall)
    assert answer["measures"]["recall"]["better"] == verdict
    assert answer["answer"]["choice"] == ("undecided" if verdict == "open" else "pytorch")


def test_what_was_not_run_says_so_and_leaves_the_answer_undecided(tmp_path):
    (tmp_path / "memory_length").mkdir()
    lstm_default.main(["--out", str(tmp_path / "memory_length")])
    answer = json.loads((tmp_path / "memory_length" / "lstm_default.json").read_text())
    assert answer["answer"] == {"wins": {"pytorch": 0, "chrono": 0}, "open_or_not_run": 5, "choice": "undecided"}
    assert "| water_maze | not run | not run | not run |" in (tmp_path / "memory_length" / "lstm_default.md").read_text()
