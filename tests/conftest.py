"""Every test starts with Python's own Ctrl-C handler, and one that leaves another behind is
named in a warning.

The Ctrl-C tests (tests/agents/test_train.py, tests/seqtasks/test_seq_train.py) press Ctrl-C in
this process and expect a KeyboardInterrupt; if an earlier test left SIGINT ignored or caught
(a context that did not restore it), they would see the trainer run on. Once in a full CI run
on a loaded machine they did, and the leak did not reproduce; so the handler is reset before
each test and a leak is reported against the test that made it, not the one it breaks.
"""

import signal
import warnings

import pytest


@pytest.fixture(autouse=True)
def default_ctrl_c_handler(request):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    handler = signal.getsignal(signal.SIGINT)
    if handler is not signal.default_int_handler:
        warnings.warn(f"{request.node.nodeid} left SIGINT's handler as {handler!r}", stacklevel=1)
        signal.signal(signal.SIGINT, signal.default_int_handler)
