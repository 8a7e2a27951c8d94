"""Choosing the device: 'auto' follows CUDA; 'cuda' where torch sees no GPU, or a GPU index the
machine does not have, is refused naming the device and what to use instead, and every command
line turns that into exit code 2 before building anything. CUDA is patched, so these hold on
machines with and without a GPU."""

import re

import pytest
import torch

import evaluate
import train_a2c
from agents.runtime.device import resolve_device
from seqtasks.__main__ import main as seqtasks_main

NO_CUDA = "device 'cuda', but torch sees no CUDA GPU here; use --device cpu (or auto)"


def test_auto_follows_cuda_and_cuda_is_checked(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match=re.escape(NO_CUDA)):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto") == torch.device("cuda") and resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ValueError, match="device 'cuda:1' does not exist; this machine has 1 GPU"):
        resolve_device("cuda:1")


@pytest.mark.parametrize("main, argv", [
    (train_a2c.main, ["--env", "corridor", "--core", "lstm"]),
    (seqtasks_main, ["--task", "random_walk"]),
    (evaluate.main, ["/nonexistent/run"]),  # refused before the checkpoint is looked for
])
def test_cuda_without_a_gpu_exits_2_from_every_command_line(main, argv, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    run_dir = [] if main is evaluate.main else ["--run-dir", str(tmp_path / "run")]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, *run_dir, "--device", "cuda"])
    assert exit_info.value.code == 2 and NO_CUDA in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
