"""The command server (experiments/frame/preloaded.py): a command forked from it runs as `python`
would run it (its argv, `__main__`, sys.path[0], folder, output, exit status, session, signals),
with torch imported already, and the server ends when the runner closes it."""

import json
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from experiments.frame.jobs import ROOT, job_env
from experiments.frame.preloaded import Preloaded
from tests.launch import wait_until

# What a command reports of itself, as one JSON line.
REPORT = ("import json, os, sys; print(json.dumps({'argv': sys.argv, 'name': __name__, 'path0': sys.path[0], "
          "'cwd': os.getcwd(), 'torch': 'torch' in sys.modules, 'omp': os.environ.get('OMP_NUM_THREADS'), "
          "'session': os.getsid(0) == os.getpid(), 'title': open('/proc/self/cmdline').read().replace(chr(0), ' ').strip()}))")


@pytest.fixture(scope="module")
def server():
    with Preloaded(job_env(), ROOT) as started:
        yield started


def run(server, tmp_path, command, name="command"):
    """Run `command` from the server to its end: (its exit status, its log's lines)."""
    log_path = tmp_path / f"{name}.log"
    with open(log_path, "a") as log:
        status = server.start(command, log).wait()
    return status, log_path.read_text().splitlines()


def test_a_script_runs_as_python_runs_it_with_torch_imported_in_a_session_of_its_own(server, tmp_path):
    script = tmp_path / "report.py"
    script.write_text(REPORT + "\n")
    status, lines = run(server, tmp_path, [sys.executable, str(script), "--flag", "1"])
    assert status == 0
    assert json.loads(lines[-1]) == {"argv": [str(script), "--flag", "1"], "name": "__main__", "path0": str(tmp_path),
                                     "cwd": str(ROOT), "torch": True, "omp": "1", "session": True,
                                     "title": f"{sys.executable} {script} --flag 1"}  # what ps and pgrep -f see


def test_a_module_and_code_run_as_python_m_and_python_c_run_them(server, tmp_path):
    status, lines = run(server, tmp_path, [sys.executable, "-c", REPORT, "a"], "code")
    assert status == 0 and json.loads(lines[-1])["argv"] == ["-c", "a"] and json.loads(lines[-1])["path0"] == ""
    data = tmp_path / "data.json"
    data.write_text('{"b": [1, 2]}')
    status, lines = run(server, tmp_path, [sys.executable, "-m", "json.tool", "--compact", str(data)], "module")
    assert status == 0 and lines == ['{"b":[1,2]}']
    status, lines = run(server, tmp_path, [sys.executable, "-m", "no_such_module_here"], "missing")
    assert status == 1 and "No module named no_such_module_here" in lines[-1]


def test_exit_statuses_and_tracebacks_are_pythons(server, tmp_path):
    assert run(server, tmp_path, [sys.executable, "-c", "raise SystemExit(3)"], "three")[0] == 3
    status, lines = run(server, tmp_path, [sys.executable, "-c", "print('before'); raise ValueError('bad value 7')"], "error")
    assert status == 1 and lines[0] == "before" and lines[-1] == "ValueError: bad value 7" and lines[-2].startswith("  File")
    assert run(server, tmp_path, ["sh", "-c", "exit 4"], "shell")[0] == 4  # not python: executed as it is


def test_a_signal_reaches_the_command_and_its_status_says_so(server, tmp_path):
    log_path = tmp_path / "sleeper.log"
    with open(log_path, "a") as log:
        process = server.start([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"], log)
        assert wait_until(lambda: "ready" in log_path.read_text(), process), "the command ended before it was ready"
        process.send_signal(signal.SIGTERM)
        assert process.wait() == -signal.SIGTERM
    process.send_signal(signal.SIGTERM)  # exited: nothing is sent to whoever has its pid now


def test_commands_started_at_once_from_threads_each_get_their_own_status(server, tmp_path):
    def one(code: int) -> int:
        return run(server, tmp_path, [sys.executable, "-c", f"raise SystemExit({code})"], f"exit{code}")[0]

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(one, range(8))) == list(range(8))


def test_closing_ends_the_server(tmp_path):
    started = Preloaded(job_env(), ROOT)
    pid = started._server.pid
    started.close()
    started.close()  # closing twice is closing once
    assert started._server.returncode == 0 and not os.path.exists(f"/proc/{pid}")


def test_a_command_gets_the_runners_per_test_variables_and_no_other_environment_is_served(server, tmp_path):
    """pytest's per-test variable changes for each test: one server serves every test, each command
    seeing the value its runner has now; any other difference needs a server started with it."""
    show = [sys.executable, "-c", "import os; print(os.environ.get('PYTEST_CURRENT_TEST', 'unset'))"]
    now = {**job_env(), "PYTEST_CURRENT_TEST": "test_this (call)"}
    assert server.serves(now)
    with open(tmp_path / "now.log", "a") as log:
        assert server.start(show, log, now).wait() == 0
    with open(tmp_path / "unset.log", "a") as log:
        assert server.start(show, log, {key: value for key, value in now.items() if key != "PYTEST_CURRENT_TEST"}).wait() == 0
    assert (tmp_path / "now.log").read_text().splitlines() == ["test_this (call)"]
    assert (tmp_path / "unset.log").read_text().splitlines() == ["unset"]
    other = {**now, "ONEDNN_MAX_CPU_ISA": "AVX2"}  # read when torch loads: the server's imports did not see it
    assert not server.serves(other)
    with open(tmp_path / "other.log", "a") as log, pytest.raises(ValueError, match="start a server with that environment"):
        server.start(show, log, other)
