"""Starting an experiment's commands from a process that has imported torch once.

Each run of an experiment is a fresh `python train_a2c.py ...` (or evaluate.py, or `python -m
MODULE`), and about 2.5 s of CPU of each goes to importing torch and numpy before it does
anything: most of a quick run's cost, and of the test suite's. `Preloaded` starts one server
process (this module's `serve`) that imports them once; each command is then a fork of that
server which runs the program as `python` would (runpy: `__main__`, sys.argv, sys.path[0], the
working folder), in a session of its own, its output and errors to the job's log, its input
/dev/null. The server has imported modules and done nothing else, with one thread (its
OMP_NUM_THREADS=1 keeps OpenBLAS and OpenMP from starting pools before the fork), so a command
starts as it would in a fresh interpreter, less the imports.

Each command's process title is its command line (setproctitle), so ps and `pgrep -f
train_a2c.py` find it as they would a fresh process. The runner sees each command as a
`Started` (pid, send_signal, poll, wait: what it used of subprocess.Popen). The server reports
each child's exit status as Popen would (negative: the signal that ended it); it exits when the
runner closes its end or dies, and a command still running then goes on, as a Popen'd one in its
own session would. CUDA is never touched by the server, so each command initialises it itself.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
import traceback
import types
from pathlib import Path

from setproctitle import setproctitle

# What the commands import (train_*.py, evaluate.py, experiments/tmaze_policy.py), torch most of it.
PRELOAD = ("numpy", "torch", "torch.utils.tensorboard", "agents.command_line", "agents.learners.train", "agents.learners.ppo",
           "agents.learners.dqn.trainer", "agents.evaluation", "envs.baselines")
MESSAGE_BYTES = 1 << 16  # a request (a command line) or a reply fits in one datagram
# Variables that change while a runner lives and that no import reads: a server started with other
# values of them serves a command as well, which gets the runner's values of them at its start.
# pytest sets PYTEST_CURRENT_TEST for each test, so without this every test that runs an
# experiment started a server of its own (its imports, some 5 s of CPU, again).
PER_COMMAND = ("PYTEST_CURRENT_TEST",)


def imported_with(env: dict[str, str]) -> dict[str, str]:
    """The part of an environment that a server's imports may have read: all but PER_COMMAND."""
    return {key: value for key, value in env.items() if key not in PER_COMMAND}


class Started:
    """A command started by the server: its pid, and its exit status once the server reports it."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self._exited = threading.Event()

    def exited(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self) -> int:
        self._exited.wait()
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Send the command `signum`, unless it has exited (its pid may be another's by now)."""
        if self.returncode is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:  # exited, its status not read yet
                pass


class Preloaded:
    """The server and the runner's end of it; a context manager that stops the server on exit.
    `start` may be called from several threads at once."""

    def __init__(self, env: dict[str, str], cwd: Path):
        self.env, self.cwd = imported_with(env), cwd
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._socket = ours
        # Its output goes nowhere, so that its children's print buffers as a fresh python's does
        # into a file; its errors to the runner's. In a session of its own: a Ctrl-C at the
        # terminal reaches the commands through the runner only, as with Popen.
        self._server = subprocess.Popen([sys.executable, "-m", "experiments.frame.preloaded", str(theirs.fileno())],
                                        cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        pass_fds=(theirs.fileno(),), start_new_session=True)
        theirs.close()
        self._starting = threading.Lock()  # one start at a time: its reply is the next "started"
        self._started_pids: list[int] = []
        self._reply = threading.Condition()
        self._processes: dict[int, Started] = {}
        self._statuses: dict[int, int] = {}  # exits reported before their Started was made
        threading.Thread(target=self._read, daemon=True).start()

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a command meant to run in `env` can start here: the server's imports saw it."""
        return imported_with(env) == self.env

    def start(self, command: list[str], log, env: dict[str, str] | None = None) -> Started:
        """Run `command` with its output to the open file `log`: [sys.executable, "script.py", ...],
        [sys.executable, "-m", "module", ...] or [sys.executable, "-c", "code", ...] in the
        preloaded interpreter, anything else executed as it is. `env`: the environment it runs in,
        one the server `serves` (its PER_COMMAND values are the command's; default: the server's)."""
        env = self.env if env is None else env
        if not self.serves(env):
            raise ValueError("a command's environment differs from the server's beyond "
                             f"{list(PER_COMMAND)}: start a server with that environment")
        request = json.dumps({"command": command, "cwd": str(self.cwd), "env": {key: env.get(key) for key in PER_COMMAND}}).encode()
        with self._starting, self._reply:
            socket.send_fds(self._socket, [request], [log.fileno()])
            while not self._started_pids:
                if not self._reply.wait(timeout=5) and self._server.poll() is not None:
                    raise RuntimeError(f"the command server exited with {self._server.returncode} before starting {command}")
            pid = self._started_pids.pop()
            process = self._processes[pid] = Started(pid)
            if pid in self._statuses:
                process.exited(self._statuses.pop(pid))
            return process

    def _read(self) -> None:
        """The server's replies: "started" (to the start waiting) and "exited" (to its command).
        Should the server end with commands running, their statuses are lost: each gets -1."""
        while data := self._receive():
            reply = json.loads(data)
            with self._reply:
                if "started" in reply:
                    self._started_pids.append(reply["started"])
                    self._reply.notify_all()
                elif reply["pid"] in self._processes:
                    self._processes.pop(reply["pid"]).exited(reply["returncode"])
                else:
                    self._statuses[reply["pid"]] = reply["returncode"]
        with self._reply:
            for process in self._processes.values():
                process.exited(-1)

    def _receive(self) -> bytes:
        try:
            return self._socket.recv(MESSAGE_BYTES)
        except OSError:  # our end shut
            return b""

    def close(self) -> None:
        """Stop the server (a command still running goes on); closing twice is closing once."""
        if self._socket.fileno() != -1:
            self._socket.shutdown(socket.SHUT_RDWR)  # the server reads the end and exits
            self._server.wait()
            self._socket.close()

    def __enter__(self) -> Preloaded:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve(channel: socket.socket) -> None:
    """Preload, then for each request fork a child that runs it (`run`), and report each
    child's exit status; return when the runner's end is closed."""
    preload()
    wake_read, wake_write = os.pipe()  # SIGCHLD writes a byte here, waking the select below
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    while True:
        ready, _, _ = select.select([channel, wake_read], [], [])
        if wake_read in ready:
            os.read(wake_read, 4096)
        report_exits(channel)
        if channel in ready:
            data, fds, _, _ = socket.recv_fds(channel, MESSAGE_BYTES, 1)
            if not data:
                return
            pid = os.fork()
            if pid == 0:
                channel.close()
                os.close(wake_read), os.close(wake_write)
                run(json.loads(data), fds[0])  # never returns
            os.close(fds[0])
            channel.send(json.dumps({"started": pid}).encode())


def preload() -> None:
    """Import PRELOAD, and what torch imports at the first operation on the meta device (its
    Python kernels, sympy: 1.7 s of CPU, paid by every command, whose model is built there first
    to check that it fits: agents/runtime/memory_budget.py). A module that fails to import is left
    to the command, whose log then says why."""
    for module in PRELOAD:
        try:
            importlib.import_module(module)
        except Exception:
            pass
    import torch

    torch.empty(1, device="meta").normal_()


def report_exits(channel: socket.socket) -> None:
    """Reap every child that has exited and send its status as Popen's returncode."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no children
            return
        if pid == 0:
            return
        channel.send(json.dumps({"pid": pid, "returncode": os.waitstatus_to_exitcode(status)}).encode())


def run(request: dict, log_fd: int) -> None:
    """In the forked child: become the command, as `python ARGV` in its own session would, and
    exit as it exits (SystemExit, an uncaught exception: its traceback and 1, as python does)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    os.dup2(log_fd, 1), os.dup2(log_fd, 2), os.close(log_fd)
    os.chdir(request["cwd"])
    for key, value in request["env"].items():  # the runner's values now, not the server's at its start
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    program, *argv = request["command"]
    setproctitle(shlex.join(request["command"]))  # what ps and pgrep -f show: the command, not the server
    if program != sys.executable or not argv or (argv[0].startswith("-") and argv[0] not in ("-m", "-c")):
        os.execvp(program, [program, *argv])  # not a plain python command: run as is
    try:
        if argv[0] == "-m":
            sys.argv = argv[1:]
            sys.path[0] = os.getcwd()  # what `python -m` puts first
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""  # what `python -c` puts first
            main = sys.modules["__main__"] = types.ModuleType("__main__")
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            sys.argv = argv
            sys.path[0] = str(Path(argv[0]).resolve().parent)  # what `python script.py` puts first
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        raise SystemExit(1) from None
    raise SystemExit(0)


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
