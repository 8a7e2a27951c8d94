"""experiments/window_cost.py: the training time until the recent success first reaches 0.95,
read from a run's logged curves; the runs' flags per window and env; the pipeline end to end (tiny)."""

import json

import pytest
from torch.utils.tensorboard import SummaryWriter

from experiments import window_cost


def logged(run_dir, points):
    """A run folder whose TensorBoard holds (frames, success, frames per second) at each update."""
    writer = SummaryWriter(str(run_dir))
    for frames, success, fps in points:
        writer.add_scalar("charts/success", success, frames)
        writer.add_scalar("charts/SPS", fps, frames)
    writer.close()


def test_time_to_solve_is_the_training_seconds_until_the_recent_success_reaches_the_threshold(tmp_path):
    # L = 2, B = 4: success over the last 4 x 4 x 4 = 64 frames, here the last 4 updates of 16.
    points = [(16 * (u + 1), 1.0 if u >= 5 else 0.0, 8.0) for u in range(12)]  # 2 s an update
    logged(tmp_path, points)
    result = window_cost.to_solve(tmp_path, length=2, num_envs=4)
    assert result == {"seconds_to_solve": 18.0, "frames_to_solve": 144, "updates_to_solve": 9, "seconds_per_update": 2.0,
                      "training_seconds": 24.0, "updates": 12}


def test_a_run_that_never_solves_has_no_time_to_solve(tmp_path):
    logged(tmp_path, [(16 * (u + 1), 0.9, 8.0) for u in range(12)])
    assert window_cost.to_solve(tmp_path, length=2, num_envs=4)["seconds_to_solve"] is None


@pytest.mark.parametrize("mode, window", [("episode", ["--rollout", "32", "--bptt", "episode"]),
                                          ("covering", ["--rollout", "32", "--bptt", "96"]), ("aligned", ["--rollout", "66"])])
def test_each_window_gets_its_flags(mode, window):
    args = window_cost.train_args("memory_length", mode, 64, seed=1, quick=False)
    assert args[-len(window) - 2:-2] == window and "gate_init=chrono,t_max=130" in args and args[:2] == ["--env", "memory_length"]


def test_a_tiny_run_of_the_pipeline_writes_its_json_and_table(tmp_path):
    window_cost.main(["--quick", "--lengths", "2", "--modes", "aligned", "--seeds", "2", "--jobs", "2",
                      "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    cell = json.loads((tmp_path / "out" / "window_cost_memory_length.json").read_text())["lengths"]["2"]["aligned"]
    assert [run["seed"] for run in cell["per_seed"]] == [0, 1] and cell["runs"] == 2
    assert "| 2 | aligned |" in (tmp_path / "out" / "window_cost_memory_length.md").read_text()
