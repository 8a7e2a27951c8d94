"""Both command lines choose the Feedback core's step path once, when the run starts: "auto"
becomes the path the run takes (compiled on the CPU in float32, here), written into the run's
config and printed as the first line; a `step=compiled` that cannot run is refused (exit code 2)
before anything is written. (The core's side: tests/cores/test_feedback_paths.py.)"""

import json

import pytest
import torch

import train_a2c
from agents.evaluation import load_run
from agents.cores.feedback import compiled as feedback_compiled
from seqtasks.__main__ import main as seqtasks_main

A2C = ["--env", "corridor", "--core", "feedback", "--num-envs", "2", "--rollout", "4", "--total-steps", "8", "--threads", "1"]
CORE = "d_model=8,n_heads=2,n_layers=1,span=4"
SEQTASKS = ["--task=random_walk", "--core=feedback", "--grid-size=3", "--walk-length=8", "--n-train=16", "--n-valid=8", "--n-test=8",
            "--d-model=8", "--n-layers=1", "--n-heads=2", "--span=4", "--batch-size=4", "--bptt=8", "--max-updates=1", "--threads=1",
            "--no-progress"]


@pytest.fixture(autouse=True)
def switch_unset(monkeypatch):
    monkeypatch.delenv(feedback_compiled.SWITCH, raising=False)
    assert feedback_compiled.extension() is not None, "the compiled Feedback step did not build"


def test_the_a2c_command_line_writes_and_prints_the_path_it_chose(tmp_path, capsys):
    train_a2c.main([*A2C, "--core-opt", CORE, "--run-dir", str(tmp_path / "run")])
    assert capsys.readouterr().out.splitlines()[0] == "core feedback: d_model=8, n_layers=1, n_heads=2, span=4, step=compiled"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["core_options"]["step"] == "compiled"


def test_seqtasks_writes_and_prints_the_path_it_chose(tmp_path, capsys):
    seqtasks_main([*SEQTASKS, "--core-opt=step=python", f"--run-dir={tmp_path / 'run'}"])
    assert capsys.readouterr().err.splitlines()[0] == "core feedback: step=python"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["core_options"] == {"step": "python"}


@pytest.mark.parametrize("main, argv", [(train_a2c.main, [*A2C, "--core-opt", CORE]), (seqtasks_main, SEQTASKS)])
def test_step_compiled_that_cannot_run_is_refused_before_the_run(tmp_path, capsys, main, argv):
    run_dir = tmp_path / "refused"
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--core-opt", "step=compiled,persistent=2", "--run-dir", str(run_dir)])
    assert exit_info.value.code == 2
    assert "error: step 'compiled' cannot run here: persistent vectors (persistent=2) run on the Python step only" in capsys.readouterr().err
    assert not run_dir.exists()


def test_a_run_resumed_or_evaluated_where_its_path_cannot_run_takes_the_other(tmp_path, capsys, monkeypatch):
    """A run that took the compiled step, resumed or evaluated where it cannot run (here: the
    switch turned off; on a GPU alike), runs the Python step, the same model, and says so."""
    run_dir = tmp_path / "run"
    train_a2c.main([*A2C, "--core-opt", CORE, "--run-dir", str(run_dir)])
    seqtasks_main([*SEQTASKS, f"--run-dir={tmp_path / 'seq'}"])
    capsys.readouterr()
    monkeypatch.setenv(feedback_compiled.SWITCH, "0")
    train_a2c.main(["--resume", str(run_dir), "--total-steps", "16"])
    assert capsys.readouterr().out.splitlines()[0].endswith("step=python")
    run = load_run(str(run_dir), torch.device("cpu"))
    assert run.config.core_options["step"] == "python"
    seqtasks_main([f"--resume={tmp_path / 'seq'}", "--max-updates=2", "--no-progress"])
    assert capsys.readouterr().err.splitlines()[0] == "core feedback: step=python"
