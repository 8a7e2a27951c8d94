"""The trainer and its command line: exact resume, Ctrl-C at any moment, results JSON,
and bad input ending in a clear error (exit code 2)."""

import dataclasses
import json
import math
import os
import re
import typing
import signal
import sys
from pathlib import Path

import pytest
import torch

import seqtasks.train
from agents.runtime.checkpoint import CheckpointError, load_checkpoint
from agents.plot_curves import read_scalars
from seqtasks.__main__ import main
from seqtasks.config import SeqConfig, resolve_config
from seqtasks.train import KIND, Run
from tests.ctrl_c import exit_code, press_ctrl_c_in, signal_when

TINY = dict(
    task="random_walk", core="feedback", grid_size=3, walk_length=8, n_train=64, n_valid=16, n_test=16,
    d_model=16, n_layers=1, n_heads=2, span=8, dropout=0.1, batch_size=4, bptt=8, warmup=2,
    eval_every=3, log_every=1, threads=1,
)
TINY_FLAGS = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]


def make(tmp_path, name, **changes):
    config, _ = resolve_config({**TINY, **changes, "run_dir": str(tmp_path / name)}, cuda=False)
    return Run.create(config, {}, tmp_path / name)


def saved_weights(path):
    payload = load_checkpoint(path, KIND)
    return payload["model"], payload["optimizer"]["state"], payload["counters"]["update"]


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)


@pytest.mark.parametrize("changes", [dict(), dict(task="adding", core="lstm", seq_length=12, batch_size=8, optimizer="adam", lr=1e-3)])
def test_resume_makes_the_same_updates_as_an_unstopped_run(tmp_path, changes):
    # 64 walks of 9 tokens in 4 rows are 18 blocks of 8: update 5 is mid-epoch, with memory carried
    whole_results = make(tmp_path, "whole", max_updates=11, **changes).train(progress=False)
    make(tmp_path, "parts", max_updates=5, **changes).train(progress=False)
    resumed = Run.resume(tmp_path / "parts", {"max_updates": 11})
    assert resumed.update == 5
    parts_results = resumed.train(progress=False)
    # The validation history spans both sittings: every 3 updates, at the first sitting's stop and at
    # the end, the same metrics as the unstopped run's; training seconds growing.
    assert [h["update"] for h in parts_results["history"]] == [3, 5, 6, 9, 11]
    shared = [h for h in parts_results["history"] if h["update"] != 5]
    for key in ("update", "accuracy", "loss"):
        assert [h[key] for h in shared] == [h[key] for h in whole_results["history"]], key
    seconds = [h["seconds"] for h in parts_results["history"]]
    assert seconds == sorted(seconds) and 0 < seconds[-1] <= parts_results["train_seconds"]
    whole, parts = saved_weights(tmp_path / "whole"), saved_weights(tmp_path / "parts")
    assert whole[2] == parts[2] == 11
    assert_same_weights(whole[0], parts[0])
    assert_same_weights(whole[1][0], parts[1][0])  # Adam's moments of the first parameter
    # TensorBoard holds every update's loss once, the last one before the checkpoint included.
    steps, _ = read_scalars(str(tmp_path / "parts"), "losses/train")
    assert steps.tolist() == list(range(1, 12))


def test_interruption_saves_a_checkpoint_to_resume_from(tmp_path):
    run = make(tmp_path, "run", max_updates=50)
    train_loss, calls = run.regime.train_loss, []

    def interrupted(model):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return train_loss(model)

    run.regime.train_loss = interrupted
    with pytest.raises(KeyboardInterrupt):
        run.train(progress=False)
    assert saved_weights(tmp_path / "run")[2] == 3
    assert Run.resume(tmp_path / "run").update == 3


def test_cli_prints_and_saves_results(tmp_path, capsys):
    run_dir = tmp_path / "cli"
    results = main([*TINY_FLAGS, "--max-updates=4", f"--run-dir={run_dir}", "--no-progress"])
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1]) == results
    assert json.loads((run_dir / "results.json").read_text()) == results
    assert set(results["test"]) == {"loss", "accuracy", "sequence_accuracy"} and results["updates"] == 4
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["config"]["grid_size"] == 3 and saved["config"]["preset"] == "auto"
    assert "preset cpu (auto: no GPU is used)" in captured.err or "preset paper" in captured.err
    assert list(run_dir.glob("events.out.tfevents.*"))


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--task", "sorting"], "unknown task 'sorting'"),
        (["--core", "rnn"], "unknown core 'rnn'"),
        (["--n-train", "0"], "n_train must be an integer >= 1, got 0"),
        (["--optimizer", "sgd"], "optimizer must be one of \\['adam', 'nesterov'\\], got 'sgd'"),
        (["--device", "tpu"], "unknown device 'tpu'"),
        (["--precision", "half"], "precision must be one of \\['fp32', 'bf16'\\], got 'half'"),
        (["--core-opt", "span=long"], "core option span='long': expected int"),
        (["--core-opt", "width=3"], "unknown option 'width' for core 'feedback'"),
        (["--n-heads", "3"], "d_model \\(16\\) must be divisible by n_heads \\(3\\)"),
        (["--task", "copy", "--core", "ffattn"], "core 'ffattn' embeds a whole sequence"),
        (["--task", "adding", "--core", "ffattn", "--core-opt", "span=4"],
         "core 'ffattn' takes no --core-opt options \\(its width is --d-model\\), got --core-opt span=4"),
        (["--env-opt", "length=3"], "unrecognized arguments: --env-opt length=3"),  # the toy tasks have no envs
        (["--n-vars", "9", "--task", "algorithmic"], "n_vars must be in 1 .. 5, got 9"),
        (["--batch-size", "100"], "n_train \\(64\\) must be >= batch_size \\(100\\)"),
        (["--lr", "nan"], "lr must be a finite number > 0, got nan"),
        (["--grad-clip", "nan"], "grad_clip must be a finite number >= 0 \\(0: no clipping\\), got nan"),
        (["--momentum", "inf"], "momentum must be in \\[0, 1\\), got inf"),
        (["--max-minutes=-inf"], "max_minutes must be a finite number >= 0 \\(0: no limit\\), got -inf"),
        (["--dropout", "nan"], "dropout must be in \\[0, 1\\), got nan"),
    ],
)
def test_bad_arguments_exit_2_naming_the_value(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        main([*TINY_FLAGS, f"--run-dir={tmp_path / 'bad'}", "--max-updates=1", *flags])
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "bad").exists()


SEQ_FLOATS = [f.name for f in dataclasses.fields(SeqConfig) if typing.get_type_hints(SeqConfig)[f.name] is float]


def test_the_float_settings_are_found():
    assert {"lr", "momentum", "grad_clip", "max_minutes", "save_every", "dropout", "negative_slope"} <= set(SEQ_FLOATS)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=repr)
@pytest.mark.parametrize("name", SEQ_FLOATS)
def test_every_float_setting_refuses_nan_and_infinities_by_name(name, bad):
    """`if x < 0: raise` lets NaN through (nan < 0 is False): every float field, found from the
    dataclass, is checked finite by the config itself, whatever the core."""
    with pytest.raises(ValueError, match=rf"^{name} must be .*, got {re.escape(repr(bad))}$"):
        SeqConfig(**{name: bad})
    with pytest.raises(ValueError, match=rf"^{name} must be "):
        SeqConfig(core="lstm", **{name: bad})


@pytest.mark.parametrize("name, value, message", [
    ("lr", 0.0, "lr must be a finite number > 0, got 0.0"),
    ("save_every", -1, "save_every must be a finite number > 0, got -1"),
    ("max_minutes", -0.5, r"max_minutes must be a finite number >= 0 \(0: no limit\), got -0.5"),
    ("grad_clip", -0.1, r"grad_clip must be a finite number >= 0 \(0: no clipping\), got -0.1"),
    ("momentum", 1.0, r"momentum must be in \[0, 1\), got 1.0"),
    ("dropout", 1.0, r"dropout must be in \[0, 1\), got 1.0"),
    ("negative_slope", -0.01, r"negative_slope must be in \[0, 1\) \(0: ReLU\), got -0.01"),
    ("lr", "1e-3", "lr must be a finite number > 0, got '1e-3'"),
])
def test_float_settings_out_of_range_are_refused_by_name(name, value, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        SeqConfig(**{name: value})


def test_resume_refuses_missing_corrupt_and_changed_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--resume", str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2 and "no checkpoint at" in capsys.readouterr().err

    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit):
        main(["--resume", str(tmp_path / "torn")])
    assert "is corrupt or not a checkpoint" in capsys.readouterr().err

    make(tmp_path, "run", max_updates=1).train(progress=False)
    with pytest.raises(SystemExit):
        main(["--resume", str(tmp_path / "run"), "--lr", "0.5"])
    assert "cannot change ['lr']" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the saved core options are kept, never silently replaced
        main(["--resume", str(tmp_path / "run"), "--core-opt", "span=4"])
    assert "--resume continues a run with its saved core options; drop --core-opt span=4" in capsys.readouterr().err

    payload = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    payload["config"]["d_model"] = 32  # weights of another shape
    torch.save(payload, tmp_path / "run" / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="does not match its run's model or config"):
        Run.resume(tmp_path / "run")


def test_a_run_saved_on_a_gpu_resumes_without_one_given_device_cpu(tmp_path, monkeypatch, capsys):
    """A run trained with --device cuda keeps that device in its config. Resumed where torch
    sees no GPU, it exits 2 naming the flag that overrides it; with --device cpu it resumes."""
    make(tmp_path, "run", max_updates=1).train(progress=False)
    payload = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    payload["config"]["device"] = "cuda"  # as a GPU machine would have saved it
    torch.save(payload, tmp_path / "run" / "checkpoint.pt")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exit_info:
        main(["--resume", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert "device 'cuda', but torch sees no CUDA GPU here; use --device cpu (or auto)" in capsys.readouterr().err
    main(["--resume", str(tmp_path / "run"), "--device", "cpu", "--max-updates", "2", "--no-progress"])
    assert saved_weights(tmp_path / "run")[2] == 2


@pytest.mark.parametrize("signum, group", [(signal.SIGINT, True), (signal.SIGTERM, False)])  # Ctrl-C; kill or timeout
def test_a_stop_signal_stops_between_updates_and_saves(tmp_path, signum, group):
    """Ctrl-C or SIGTERM in the update loop: the update under way finishes, the checkpoint is
    saved, the exit code is 128 + the signal with one line and no traceback."""
    run_dir = tmp_path / "stopped"
    # A checkpoint after every update shows the loop runs; no validation, so no early stop.
    command = [sys.executable, "-m", "seqtasks", *TINY_FLAGS, "--max-updates=100000", "--eval-every=100000", "--save-every=0.001",
               f"--run-dir={run_dir}", "--no-progress"]
    code, err = signal_when(command, lambda: (run_dir / "checkpoint.pt").is_file(), signum, group)
    assert code == 128 + signum, err
    assert f"resume with python -m seqtasks --resume {run_dir}" in err and "Traceback" not in err
    assert Run.resume(run_dir).update == saved_weights(run_dir)[2] >= 1


SHORT_FLAGS = [*TINY_FLAGS, "--max-updates=4", "--no-progress"]  # validations after updates 3 and 4


@pytest.fixture(scope="module")
def unstopped_results(tmp_path_factory):
    return main([*SHORT_FLAGS, f"--run-dir={tmp_path_factory.mktemp('unstopped')}"])


ANY_CALL = lambda *args, **kwargs: True  # noqa: E731
PHASES = [  # where Ctrl-C is pressed, and the update the checkpoint then holds (None: no checkpoint)
    ("setup", seqtasks.train, "build_model", ANY_CALL, None),
    ("an update", Run, "step", lambda run: run.update == 1, 2),
    ("a validation", Run, "_validate", ANY_CALL, 3),
    ("the last checkpoint write", torch, "save", ANY_CALL, 4),
    ("the test", Run, "_test", ANY_CALL, 4),
    ("writing results.json", os, "replace", lambda source, target: Path(target).name == "results.json", 4),
]


def untimed(results: dict) -> dict:
    """Results without the training seconds, which differ between any two runs."""
    history = [{k: v for k, v in entry.items() if k != "seconds"} for entry in results["history"]]
    return {**{k: v for k, v in results.items() if k != "train_seconds"}, "history": history}


@pytest.mark.parametrize("phase, owner, name, when, saved_update", PHASES, ids=[phase[0] for phase in PHASES])
def test_ctrl_c_anywhere_exits_130_and_resumes_to_the_same_results(tmp_path, monkeypatch, capsys, unstopped_results, phase, owner, name, when, saved_update):
    run_dir = tmp_path / "run"
    press_ctrl_c_in(monkeypatch, owner, name, when)
    assert exit_code(main, [*SHORT_FLAGS, f"--run-dir={run_dir}"]) == 130
    err = capsys.readouterr().err
    monkeypatch.undo()
    if saved_update is None:
        assert "interrupted: while setting up; nothing was saved" in err
        assert not (run_dir / "checkpoint.pt").exists()
        return
    assert f"interrupted: at update {saved_update}; resume with python -m seqtasks --resume {run_dir}" in err
    assert saved_weights(run_dir)[2] == saved_update
    if (run_dir / "results.json").exists():  # Ctrl-C while writing it: the file is whole
        assert untimed(json.loads((run_dir / "results.json").read_text())) == untimed(unstopped_results)
    assert untimed(main(["--resume", str(run_dir), "--no-progress"])) == untimed(unstopped_results)


def test_a_bf16_run_computes_in_bfloat16_and_learns(tmp_path):
    """--precision bf16: the core's products are bfloat16 (autocast), the weights and the loss
    float32, validation runs at the same precision, and the training loss falls. (The products,
    not the core's output: CUDA's autocast runs LayerNorm, the core's last operation, in float32.)"""
    run = make(tmp_path, "bf16", precision="bf16", dropout=0.0, lr=3e-3, max_updates=60)
    dtypes = []
    for linear in (m for m in run.model.core.modules() if isinstance(m, torch.nn.Linear)):
        linear.register_forward_hook(lambda module, inputs, output: dtypes.append(output.dtype))
    losses = [float(run.step()[0]) for _ in range(60)]
    assert set(dtypes) == {torch.bfloat16}
    assert {p.dtype for p in run.model.parameters()} == {torch.float32} and all(math.isfinite(loss) for loss in losses)
    assert sum(losses[-10:]) < 0.9 * sum(losses[:10]), losses  # (measured: 16 % lower)
    dtypes.clear()
    assert 0.0 <= run.evaluate("valid")["accuracy"] <= 1.0 and set(dtypes) == {torch.bfloat16}
