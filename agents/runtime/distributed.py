"""Several processes, GPUs or machines: PyTorch's own engine (torch.distributed), started by torchrun.

    torchrun --nproc-per-node 2 train_a2c.py ...        # or python -m seqtasks ...

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK in each process; `init()` joins them into one
process group. Without those variables (a plain `python train_a2c.py`) nothing happens: the
world is one process and every helper here is the identity, so single-process behaviour is
unchanged. Both trainers (agents/learners/train.py and seqtasks/train.py) use this module and nothing else
from torch.distributed directly.

Backends: gloo on CPU; on a machine with CUDA, "cpu:gloo,cuda:nccl", so CUDA tensors (gradients)
go over NCCL and Python objects (checkpoint parts, episode statistics) over gloo, whatever device
the run's config later asks for. A CUDA run uses GPU LOCAL_RANK in each process; NCCL cannot
share a GPU between processes, so `device_for` refuses a CUDA run with more processes on a
machine (LOCAL_WORLD_SIZE) than it has GPUs, saying what to do instead. Every collective has a
timeout (TIMEOUT_VARIABLE, default DEFAULT_TIMEOUT seconds): a rank that dies or hangs ends the
others with an error, never a hang (torchrun also stops the others when one exits with an error).
The ranks take the same steps in lockstep, so no rank waits on another for long in a healthy run.
"""

from __future__ import annotations

import datetime
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import torch
import torch.distributed as dist

from durable.interrupt import ignore_stop_signals

T = TypeVar("T")
TIMEOUT_VARIABLE = "FEEDBACK_RL_DIST_TIMEOUT"
DEFAULT_TIMEOUT = 300.0  # seconds; a checkpoint write on rank 0 (others wait) fits well within it


class RankError(RuntimeError):
    """Another rank died, failed or timed out: the run cannot go on (the message says what)."""


@dataclass(frozen=True)
class World:
    """This process's place among the ranks (rank 0 of 1 when not under torchrun)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1  # processes on this machine

    @property
    def main(self) -> bool:
        """Rank 0 logs, prints progress and writes checkpoints."""
        return self.rank == 0

    def share(self, total: int, what: str) -> tuple[int, int]:
        """This rank's contiguous [start, stop) of `total` items (envs, batch rows): equal shares,
        so N ranks together hold exactly what one process would, slot for slot."""
        if total % self.size:
            raise ValueError(f"{what} ({total}) must be divisible by the number of processes ({self.size}); "
                             f"use a multiple of {self.size}")
        size = total // self.size
        return self.rank * size, (self.rank + 1) * size


def timeout_seconds() -> float:
    text = os.environ.get(TIMEOUT_VARIABLE, str(DEFAULT_TIMEOUT))
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"{TIMEOUT_VARIABLE}={text!r} must be a positive number of seconds")
    return seconds


def _local() -> tuple[int, int]:
    """This process's LOCAL_RANK and the LOCAL_WORLD_SIZE of its machine, as torchrun sets them
    (without LOCAL_WORLD_SIZE, at least LOCAL_RANK + 1 processes are on this machine)."""
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    return local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", local_rank + 1))


def _launched() -> bool:
    """Whether torchrun started this process as one of several (RANK and WORLD_SIZE > 1 set)."""
    return "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


def init() -> World:
    """Join torchrun's process group once (later calls return the same World); the single
    process World when RANK / WORLD_SIZE are not set or the world has one process."""
    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size(), *_local())
    if not _launched():
        return World()
    local_rank, local_size = _local()
    backend = "gloo"
    if torch.cuda.is_available():
        if local_rank < torch.cuda.device_count():  # a process beyond the GPUs may only run on the CPU (device_for)
            torch.cuda.set_device(local_rank)
        backend = "cpu:gloo,cuda:nccl"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_seconds()))
    return World(dist.get_rank(), dist.get_world_size(), local_rank, local_size)


def device_for(device: torch.device, world: World) -> torch.device:
    """Under torchrun a CUDA learner uses GPU LOCAL_RANK, one GPU per process: NCCL cannot share
    one between processes, so a CUDA run with more processes on a machine than it has GPUs is
    refused here (every rank finds the same), before any collective could fail obscurely."""
    if world.size > 1 and device.type == "cuda":
        gpus = torch.cuda.device_count()
        if world.local_size > gpus:
            raise ValueError(f"{world.local_size} processes on this machine but {gpus} GPU(s): each process of a CUDA run "
                             f"needs a GPU of its own (NCCL cannot share one); start at most {gpus} per machine "
                             f"(torchrun --nproc-per-node {gpus}), or train on the CPU (--device cpu)")
        return torch.device("cuda", world.local_rank)
    return device


def close() -> None:
    """Leave the process group (if in one)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def run_command(main: Callable[[], object]) -> None:
    """Run a command's `main` (train_a2c.py, train_ppo.py, python -m seqtasks), then ignore stop
    signals: the run is saved and reported, a signal now has nothing left to stop. Started by
    torchrun as one of several processes, end the process right there with main's exit code
    (sys.exit's rules: None is 0, a message is printed and gives 1), skipping Python's shutdown.

    Why: gloo runs each collective on a worker thread, which lets go of the collective's
    tensors just after the caller's wait returns. If that thread is late (a loaded machine) and
    Python has meanwhile begun shutting down, dropping a tensor that Python also saw needs the
    GIL, Python ends the thread instead, and the C++ destructor it was in aborts the process
    ("terminate called without an active exception", exit -6) after a run that finished and
    saved: 2 of 156 torchrun launches of tests/seqtasks/test_seq_distributed.py's run on the
    2-core machine. close() cannot join those threads: torch 2.13 keeps a group that DDP has
    wrapped a model with alive after destroy_process_group. So a rank ends without shutdown;
    everything it wrote is closed by then (checkpoints, TensorBoard writers, actor workers,
    the process group), and stdout and stderr are flushed here. An exception other than
    SystemExit goes on as usual."""
    try:
        main()
    except SystemExit as exit:
        if not _launched():
            raise
        code = exit.code
    else:
        code = 0
    ignore_stop_signals()
    if _launched():
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)


def wait_for_all(what: str) -> None:
    """Return once every rank got here, e.g. once rank 0 has written a checkpoint: a rank that
    left the group while rank 0 was still in a collective with it would abort in gloo."""
    if dist.is_initialized():
        _collective(what, dist.barrier)


def _collective(what: str, run: Callable[[], T]) -> T:
    """Run a collective; a dead, failed or late rank raises RankError naming `what`."""
    try:
        return run()
    except (RuntimeError, dist.DistError) as error:  # gloo reports a lost peer as RuntimeError
        raise RankError(f"another process of this run died or stopped answering while {what} ({error})") from error


def sum_tensor(tensor: torch.Tensor, what: str) -> torch.Tensor:
    """The sum of `tensor` over ranks, in place (and returned); the tensor itself in one process."""
    if dist.is_initialized():
        _collective(what, lambda: dist.all_reduce(tensor))
    return tensor


def sum_gradients(parameters: list[torch.nn.Parameter]) -> None:
    """Sum the gradients of `parameters` over ranks as one flat buffer (one all-reduce, not one
    per tensor); a missing gradient counts as zero, so every rank sends the same buffer shape."""
    if not dist.is_initialized():
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
    flat = torch.cat([g.reshape(-1) for g in grads])
    sum_tensor(flat, "summing gradients")
    for parameter, chunk in zip(parameters, flat.split([p.numel() for p in parameters])):
        parameter.grad = chunk.view_as(parameter)


def gather_to_main(value: Any, what: str) -> list[Any] | None:
    """Every rank's `value` on rank 0, in rank order (None elsewhere); [value] in one process."""
    if not dist.is_initialized():
        return [value]
    out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    _collective(what, lambda: dist.gather_object(value, out, dst=0))
    return out


def gather_parts(own: dict[str, Any], world: World, what: str) -> dict[str, Any] | None:
    """This rank's parts of a checkpoint (key -> value), as rank 0 saves them: `own` itself in
    one process; under torchrun, on rank 0, each key's values of every rank in rank order (None
    on the others). Every rank must call it."""
    if world.size == 1:
        return own
    parts = gather_to_main(own, what)
    return None if parts is None else {key: [part[key] for part in parts] for key in own}


def own_part(payload: dict[str, Any], key: str, world: World) -> Any:
    """This rank's part of a checkpoint's `key` (see gather_parts): the value itself when one
    process saved it (checkpoints from before torchrun too), this rank's when as many processes
    as now did, rank 0's when another number did (the caller then restarts what depends on it)."""
    saved = payload.get("world_size", 1)
    if saved == 1:
        return payload[key]
    return payload[key][world.rank if saved == world.size else 0]


def all_gather(value: Any, what: str) -> list[Any]:
    """Every rank's `value` on every rank, in rank order; [value] in one process."""
    if not dist.is_initialized():
        return [value]
    out = [None] * dist.get_world_size()
    _collective(what, lambda: dist.all_gather_object(out, value))
    return out


def from_main(make: Callable[[], T], what: str) -> T:
    """`make()` run on rank 0 and its result (or the exception it raised) sent to every rank:
    e.g. reading a checkpoint that only rank 0's machine holds. Every rank then returns the same
    value or raises the same exception, so none is left waiting."""
    if not dist.is_initialized():
        return make()
    box: list[Any] = [None]
    if dist.get_rank() == 0:
        try:
            box[0] = ("ok", make())
        except Exception as error:  # sent to the others, then raised here too
            box[0] = ("error", error)
    _collective(what, lambda: dist.broadcast_object_list(box, src=0))
    status, value = box[0]
    if status == "error":
        raise value
    return value


def any_rank(flags: list[bool], what: str) -> list[bool]:
    """Each flag True if it is True on any rank (e.g. "stop", "save"): so every rank takes the
    same branch and none is left alone in a collective."""
    tensor = torch.tensor([float(flag) for flag in flags])
    if dist.is_initialized():
        _collective(what, lambda: dist.all_reduce(tensor, op=dist.ReduceOp.MAX))
    return [bool(value) for value in tensor.tolist()]


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside a DistributedDataParallel wrapper (the model itself otherwise)."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def data_parallel(model: torch.nn.Module, world: World) -> torch.nn.Module:
    """`model` wrapped in DistributedDataParallel under torchrun (its forward then averages the
    gradients of the backward that follows over ranks); the model itself in one process."""
    if world.size == 1:
        return model
    device = next(model.parameters()).device
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
