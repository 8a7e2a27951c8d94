"""Every test starts with Python's own Ctrl-C handler, and a test that leaves another behind fails.

The Ctrl-C tests (tests/agents/test_train.py, tests/seqtasks/test_seq_train.py) press Ctrl-C in
this process and expect a KeyboardInterrupt; if an earlier test left SIGINT ignored or caught
(a context that did not restore it), they would see the trainer run on. Once in a full CI run
on a loaded machine they did, and the leak did not reproduce; so the handler is reset before
each test, and a test after which the handler is not Python's own errors at teardown, named: a
trainer that leaves Ctrl-C ignored or caught fails CI (tests/test_conftest.py shows it does).
"""

import signal

import pytest

pytest_plugins = ["pytester"]  # tests/test_conftest.py runs a small suite under this conftest


@pytest.fixture(autouse=True)
def default_ctrl_c_handler(request):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    handler = signal.getsignal(signal.SIGINT)
    if handler is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        pytest.fail(f"{request.node.nodeid} left SIGINT's handler as {handler!r}; restore it (signal.signal) before returning")
