"""Several processes under torchrun (CPU, gloo): two ranks train exactly as one process on the
same global batch, resume exactly (and on another number of processes, restarting episodes), a
killed rank ends the others with an error, and a CUDA run gets a GPU for each process or is
refused (the GPU count patched)."""

import os
import re
import signal
import sys

import pytest
import torch

import train_a2c
from agents.runtime.checkpoint import load_checkpoint
from agents.runtime import distributed
from agents.runtime.distributed import TIMEOUT_VARIABLE, World, timeout_seconds
from agents.learners.train import Trainer
from tests.agents.test_train import SMALL, small_config
from tests.launch import DEADLINE, start_ranks, torchrun, wait_until
from tests.trained import trained_parameters

# Adam divides by sqrt(v) + eps: a gradient that is zero but for rounding (a key bias, which
# softmax ignores) would have its float noise, which the order of the ranks' sums changes, made
# into a step of the learning rate's size. eps 1e-4 keeps such noise at its own size and leaves
# the real gradients (1e-3 and up here) normalised as usual.
EPS = 1e-4
# float32 has 24 bits (eps 1.2e-7). Two ranks sum the gradient in another order than one
# process (each rank's half, then the halves): a few roundings per gradient entry, carried
# through 3-6 Adam steps of lr 1e-3. 1e-5 relative (about 80 eps) with 1e-6 absolute for entries
# near zero is far above that and far below a wrong update (a missing rank's share, a mean of
# means or unsynchronised statistics change the weights in the third digit).
TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


def flags(run_dir, core, updates, **extra):
    """train_a2c.py flags for small_config(run_dir, core, updates, **extra)."""
    given = {"env": "corridor", "core": core, "num_envs": 6, "rollout": 8, "total_steps": updates * 48, "seed": 3,
             "threads": 1, "optimizer_eps": EPS, "run_dir": run_dir, **extra}
    argv = ["train_a2c.py", "--env-opt", "length=3,max_episode_steps=7",
            "--core-opt", ",".join(f"{k}={v}" for k, v in SMALL[core].items())]
    return argv + [f"--{key.replace('_', '-')}={value}" for key, value in given.items()]


def assert_close_parameters(one: dict, two: dict) -> None:
    assert one.keys() == two.keys()
    for key in one:
        torch.testing.assert_close(two[key], one[key], **TOLERANCE, msg=key)


def test_two_ranks_train_and_resume_as_one_process(tmp_path):
    """Feedback keeps the acting graph (gradients summed by hand); episodes of at most 7 steps
    in rollouts of 8, so the resume happens mid-episode with memory carried. A run resumed on
    another number of processes (2 -> 1, 1 -> 2) restarts its episodes, says so once and trains on."""
    run = str(tmp_path / "two")
    first = torchrun(2, *flags(run, "feedback", 3))
    assert first.returncode == 0, first.stderr[-3000:]
    saved = load_checkpoint(run, "a2c")
    assert saved["world_size"] == 2 and len(saved["envs"]) == 2 and saved["counters"]["global_step"] == 144
    assert_close_parameters(trained_parameters(small_config(tmp_path / "one3", optimizer_eps=EPS)), saved["policy"])

    resumed = torchrun(2, "train_a2c.py", "--resume", run, "--total-steps", "288")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming {run} at step 144: envs and memory continue" in resumed.stdout
    straight = trained_parameters(small_config(tmp_path / "one6", updates=6, optimizer_eps=EPS))
    assert_close_parameters(straight, load_checkpoint(run, "a2c")["policy"])

    elsewhere = Trainer.from_checkpoint(run)  # one process: the ranks' envs do not fit
    try:
        assert elsewhere.resumed_how == "clean episode restart: the number of processes differs (2 saved, 1 now)"
        elsewhere.update()
    finally:
        elsewhere.close()
    alone = str(tmp_path / "one3")  # saved by one process, resumed by two
    spread = torchrun(2, "train_a2c.py", "--resume", alone, "--total-steps", "192")
    assert spread.returncode == 0, spread.stderr[-3000:]
    assert spread.stdout.count(f"resuming {alone} at step 144: clean episode restart: the number of processes differs (1 saved, 2 now)") == 1
    saved = load_checkpoint(alone, "a2c")
    assert saved["world_size"] == 2 and len(saved["envs"]) == 2 and saved["counters"]["global_step"] == 192


def test_two_ranks_with_ddp_train_as_one_process(tmp_path):
    """The LSTM recomputing the chunk: the learner's forward goes through DistributedDataParallel."""
    run = str(tmp_path / "two")
    result = torchrun(2, *flags(run, "lstm", 3, learner="recompute"))
    assert result.returncode == 0, result.stderr[-3000:]
    one = trained_parameters(small_config(tmp_path / "one", "lstm", learner="recompute", optimizer_eps=EPS))
    assert_close_parameters(one, load_checkpoint(run, "a2c")["policy"])


def test_a_killed_rank_ends_the_others_with_an_error_and_the_checkpoint_intact(tmp_path):
    ranks = start_ranks(2, *flags(str(tmp_path), "feedback", 100_000, save_every=0.001))
    try:
        written = wait_until((tmp_path / "checkpoint.pt").exists, ranks[0])  # a checkpoint after each update
        assert written, ranks[0].communicate()[1][-3000:]
        os.kill(ranks[1].pid, signal.SIGKILL)
        _, errors = ranks[0].communicate(timeout=DEADLINE)  # within the collective timeout (60 s) at the latest
    finally:
        for rank in ranks:
            rank.kill()
            rank.communicate()
    assert ranks[0].returncode == 1
    assert "training stopped (process 0 of 2): another process of this run died or stopped answering" in errors
    assert load_checkpoint(tmp_path, "a2c")["counters"]["updates"] >= 1


def test_bad_sizes_and_timeouts_name_the_value(tmp_path, monkeypatch):
    assert World(1, 3).share(6, "num_envs") == (2, 4)
    monkeypatch.setattr(distributed, "init", lambda: World(0, 4))  # as rank 0 of 4 would see it
    with pytest.raises(ValueError, match=r"num_envs \(6\) must be divisible by the number of processes \(4\); use a multiple of 4"):
        Trainer(small_config(tmp_path))
    monkeypatch.setattr(distributed, "init", lambda: World(0, 2))
    with pytest.raises(ValueError, match=r"num_actors \(4\) is per process and must be <= its share of num_envs \(3 = 6 / 2 processes\)"):
        Trainer(small_config(tmp_path, num_actors=4))
    monkeypatch.setenv(TIMEOUT_VARIABLE, "soon")
    with pytest.raises(ValueError, match=f"{TIMEOUT_VARIABLE}='soon' must be a positive number of seconds"):
        timeout_seconds()


def join_as_second_of_two(monkeypatch, gpus: int) -> tuple[World, dict]:
    """distributed.init() in the second of two processes torchrun started on a machine with
    `gpus` GPUs (patched: there may be none here), joining the group stubbed; also what it chose
    (the backend, and the GPU it made current if any)."""
    chosen = {}
    for name, value in {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: chosen.update(gpu=index))
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda backend, timeout: chosen.update(backend=backend))
    monkeypatch.setattr(distributed.dist, "get_rank", lambda: 1)
    monkeypatch.setattr(distributed.dist, "get_world_size", lambda: 2)
    return distributed.init(), chosen


def test_each_process_of_a_cuda_run_needs_a_gpu_of_its_own(monkeypatch, tmp_path, capsys):
    """Two processes on a one-GPU machine would share cuda:0 (rank r took GPU r % count), which
    NCCL refuses mid-run with an error that does not say what to do: refused before training,
    naming the counts and the way out. A CPU run of as many processes stays allowed (gloo), the
    second process claims no GPU, and with a GPU each, rank r of a machine takes GPU r."""
    world, chosen = join_as_second_of_two(monkeypatch, gpus=1)
    assert world == World(1, 2, 1, 2) and chosen == {"backend": "cpu:gloo,cuda:nccl"}
    message = ("2 processes on this machine but 1 GPU(s): each process of a CUDA run needs a GPU of its own (NCCL cannot "
               "share one); start at most 1 per machine (torchrun --nproc-per-node 1), or train on the CPU (--device cpu)")
    with pytest.raises(ValueError, match=re.escape(message)):
        distributed.device_for(torch.device("cuda"), world)
    assert distributed.device_for(torch.device("cpu"), world) == torch.device("cpu")
    assert distributed.device_for(torch.device("cuda"), World(1, 2, 0, 1)) == torch.device("cuda", 0)  # one process on each of 2 machines
    monkeypatch.setattr(distributed, "init", lambda: world)  # the command line, in that process: exit 2 with the message
    with pytest.raises(SystemExit) as exit_info:
        train_a2c.main([*flags(str(tmp_path), "lstm", 1)[1:], "--device=cuda"])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    monkeypatch.undo()  # the real init again, on a machine with a GPU for each process

    world, chosen = join_as_second_of_two(monkeypatch, gpus=2)
    assert chosen == {"backend": "cpu:gloo,cuda:nccl", "gpu": 1}
    assert distributed.device_for(torch.device("cuda"), world) == torch.device("cuda", 1)


# Two bare ranks that join a group, share a value (a collective whose tensors Python saw, as
# at the end of a run), then end through run_command: rank 0 returning, rank 1 by sys.exit with
# a message. An atexit handler tells whether Python's shutdown ran.
ENDING = """
import atexit, sys
from agents.runtime import distributed
world = distributed.init()
value = distributed.from_main(lambda: "shared", "sharing")
atexit.register(lambda: print("shutdown ran", flush=True))
def main():
    distributed.close()
    print(f"rank {world.rank} has {value}")
    if world.rank == 1:
        sys.exit("rank 1 stops with a message")
distributed.run_command(main)
"""


def test_a_rank_ends_without_pythons_shutdown_and_keeps_its_exit_code_and_output():
    """A torchrun rank must not reach Python's shutdown, where a gloo worker thread still letting
    go of the last collective's tensors aborts the process (distributed.run_command). Its exit
    code and what it printed (stdout is a pipe here, so block-buffered) come out as sys.exit's."""
    ranks = start_ranks(2, "-c", ENDING)
    outputs = [rank.communicate(timeout=DEADLINE) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 1], [errors[-3000:] for _, errors in outputs]
    assert [out for out, _ in outputs] == ["rank 0 has shared\n", "rank 1 has shared\n"]  # flushed; no "shutdown ran"
    assert outputs[1][1].endswith("rank 1 stops with a message\n")


def test_run_command_in_one_process_ends_as_python_would(monkeypatch):
    """Not under torchrun, run_command returns after main (or lets its SystemExit through), so
    in-process callers and plain `python train_a2c.py` keep Python's shutdown; stop signals
    are ignored once main has returned."""
    monkeypatch.delenv("RANK", raising=False)
    ignored = []
    monkeypatch.setattr(distributed, "ignore_stop_signals", lambda: ignored.append(True))
    for code in (143, "a message"):
        with pytest.raises(SystemExit) as exit:
            distributed.run_command(lambda: sys.exit(code))  # noqa: B023  (called at once)
        assert exit.value.code == code and ignored == []
    distributed.run_command(lambda: None)
    assert ignored == [True]
