"""Every test starts with Python's own handlers for the stop signals, and a test that leaves
another behind fails.

The stop-signal tests (tests/agents/test_train.py, tests/seqtasks/test_seq_train.py,
tests/test_signals.py) signal this process and expect a KeyboardInterrupt; if an earlier test
left SIGINT ignored or caught (a context that did not restore it), they would see the trainer run
on. Once in a full CI run on a loaded machine they did, and the leak did not reproduce; so the
handlers are reset before each test, and a test after which one is not Python's own errors at
teardown, named: a trainer that leaves a stop signal ignored or caught fails CI
(tests/test_conftest.py shows it does). Python's own: default_int_handler for SIGINT, SIG_DFL
for SIGTERM, SIGHUP and SIGUSR2 (durable/interrupt.py: STOP_SIGNALS).
"""

import os
import signal

# Under pytest-xdist (README's `-n 3`) each worker gets its share of the cores (at least one) for
# torch's own threads and for OpenBLAS's (numpy's and SciPy's, read when each library loads, so
# set before torch imports numpy; a value already given wins): two workers of two threads each
# on two cores made every in-process product wait on the other worker's threads. SciPy's
# L-BFGS-B on a 3-parameter fit took 2 ms a call on two OpenBLAS threads of a busy 2-core machine,
# 0.2 ms on one: tests/experiments/test_frames_to_solve.py's 1,000 bootstrap fits, 75 s against 7.
SHARE = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])) if "PYTEST_XDIST_WORKER_COUNT" in os.environ else None
if SHARE is not None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(SHARE))

import pytest  # noqa: E402
import torch  # noqa: E402

from durable.interrupt import STOP_SIGNALS  # noqa: E402

pytest_plugins = ["pytester"]  # tests/test_conftest.py runs a small suite under this conftest

if SHARE is not None:
    torch.set_num_threads(SHARE)


def _python_default(signum: int):
    return signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL


@pytest.fixture(autouse=True)
def full_float32():
    """No TF32 on a GPU: the tests hold float32 results to float32's rounding (tests/float32.py),
    and TF32 keeps 10 bits of a product's inputs (torch's default for cuDNN's RNNs: on an H200
    the LSTM's learning pass then missed its stepwise twin by more than float32's tolerance)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture(autouse=True)
def default_stop_handlers(request):
    for signum in STOP_SIGNALS:
        signal.signal(signum, _python_default(signum))
    yield
    leaked = []
    for signum in STOP_SIGNALS:
        handler = signal.getsignal(signum)
        if handler is not _python_default(signum):
            signal.signal(signum, _python_default(signum))
            leaked.append(f"{signal.Signals(signum).name}'s handler as {handler!r}")
    if leaked:
        pytest.fail(f"{request.node.nodeid} left {', '.join(leaked)}; restore it (signal.signal) before returning")
