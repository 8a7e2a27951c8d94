"""Every bad input is one line naming the value and what is allowed, exit code 2, nothing lost:
sizes no machine holds are refused with their memory estimate before anything is allocated (they
used to hang or end in an allocator's traceback), and a resumed checkpoint's fields are checked
(counters, world_size, generators, env positions, seqtasks' best weights) before a run takes them."""

import math

import pytest
import torch

import evaluate
import train_a2c
from seqtasks.__main__ import main as seqtasks_main
from tests.agents.test_run_folder_safety import FLAGS, SEQ_FLAGS
from tests.usage import refused

HUGE = "1000000000000"


def one_line(err: str) -> str:
    """The error line of a usage error (argparse prints the usage above it)."""
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, message", [
    (["--num-envs", HUGE], "--num-envs 1,000,000,000,000 needs about"),
    (["--rollout", HUGE], "a rollout of --rollout 1,000,000,000,000 steps of --num-envs 4 envs needs about"),
    (["--embed-dim", "1000000000"], "needs about"),
    (["--core-opt", "hidden_size=100000"], "the lstm policy (40,"),
    (["--core-opt", "hidden_size=1000000000"], "the lstm policy asks for tensors larger than any machine holds"),
    (["--learning-rate", "1e39"], "learning_rate must be at most 3.402823e+38 (the largest float32, which the optimiser computes in), got 1e+39"),
])
def test_a_size_or_rate_no_machine_holds_is_refused_before_anything_is_allocated(tmp_path, capsys, argv, message):
    err = one_line(refused(capsys, train_a2c.main, [*FLAGS, "--total-steps", "64", "--run-dir", str(tmp_path / "run"), *argv]))
    assert message in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, message", [
    (["--d-model=1000000000"], "the lstm model asks for tensors larger than any machine holds"),
    (["--lr=1e39"], "lr must be at most 3.402823e+38"),
])
def test_seqtasks_refuses_a_model_or_rate_no_machine_holds(tmp_path, capsys, argv, message):
    flags = [flag for flag in SEQ_FLAGS if not flag.startswith("--d-model")] + (["--d-model=8"] if "--d-model" not in argv[0] else [])
    assert message in one_line(refused(capsys, seqtasks_main, [*flags, f"--run-dir={tmp_path / 'run'}", *argv]))
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run = tmp_path_factory.mktemp("trained")
    train_a2c.main([*FLAGS, "--total-steps", "64", "--run-dir", str(run)])
    return run


@pytest.mark.parametrize("argv, message", [
    (["--episodes", HUGE], "keeping the results of --episodes 1,000,000,000,000 needs about"),
    (["--episodes", "4", "--num-envs", HUGE], "--num-envs 1,000,000,000,000 needs about"),
])
def test_evaluate_refuses_sizes_no_machine_holds(trained, capsys, argv, message):
    assert message in one_line(refused(capsys, evaluate.main, [str(trained), *argv]))


def test_evaluate_refuses_weights_that_are_not_finite(tmp_path, trained, capsys):
    payload = torch.load(trained / "checkpoint.pt", weights_only=True)
    name = next(key for key, value in payload["policy"].items() if value.is_floating_point())
    payload["policy"][name] = torch.full_like(payload["policy"][name], math.nan)
    torch.save(payload, tmp_path / "checkpoint.pt")
    err = one_line(refused(capsys, evaluate.main, [str(tmp_path), "--episodes", "2"]))
    assert f"policy[{name!r}] holds NaN or infinite values" in err


def corrupt(payload, field):
    """`payload` with `field` made wrong, as a crafted or damaged checkpoint holds it."""
    if field == "global_step":
        payload["counters"]["global_step"] = -1_000_000_000
    elif field == "updates":
        payload["counters"]["updates"] = "many"
    elif field == "world_size":
        payload["world_size"] = 0
    elif field == "world_size parts":
        payload["world_size"] = 2
    elif field == "rng":
        payload["rng"]["numpy"]["state"]["key"] = [1, 2, 3]
    elif field == "recent_returns":
        payload["recent_returns"] = "high"
    elif field == "env position":
        payload["envs"]["state"][0]["rules"]["arrays"]["position"][0] = 99
    return payload


@pytest.mark.parametrize("field, message", [
    ("global_step", "counter global_step is -1000000000; it must be an integer in [0,"),
    ("updates", "counter updates is 'many'"),
    ("world_size", "world_size is 0; it must be an integer >= 1"),
    ("world_size parts", "rng must be a list of its 2 processes' parts"),
    ("rng", "random generator states (rng) cannot be restored"),
    ("recent_returns", "recent_returns are str"),
    ("env position", "'position' holds 99, outside this env's [0, 2]"),
])
def test_a_resumed_checkpoint_with_a_bad_field_is_refused_naming_it(tmp_path, trained, capsys, field, message):
    payload = corrupt(torch.load(trained / "checkpoint.pt", weights_only=True), field)
    torch.save(payload, tmp_path / "checkpoint.pt")
    before = (tmp_path / "checkpoint.pt").read_bytes()
    assert message in one_line(refused(capsys, train_a2c.main, ["--resume", str(tmp_path)]))
    assert (tmp_path / "checkpoint.pt").read_bytes() == before


@pytest.mark.parametrize("field, message", [
    ("best_model", "best_model["),
    ("block", "its block is -3"),
])
def test_a_resumed_seqtasks_checkpoint_with_a_bad_field_is_refused_naming_it(tmp_path, capsys, field, message):
    run = tmp_path / "run"
    seqtasks_main([*SEQ_FLAGS, f"--run-dir={run}"])
    payload = torch.load(run / "checkpoint.pt", weights_only=True)
    if field == "best_model":
        name = next(iter(payload["best_model"]))
        payload["best_model"][name] = torch.zeros(3, 3, 3)
    else:
        payload["regime"]["block"] = -3
    torch.save(payload, run / "checkpoint.pt")
    capsys.readouterr()
    assert message in one_line(refused(capsys, seqtasks_main, ["--resume", str(run), "--max-updates", "4"]))
