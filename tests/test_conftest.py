"""tests/conftest.py turns a test that leaves a stop signal's handler changed (SIGINT, SIGTERM,
SIGHUP, SIGUSR2) into an error, naming it, and every test after it starts with Python's own
handlers again."""

from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")


def test_a_test_that_leaves_ctrl_c_ignored_or_caught_fails(pytester):
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_leaks="""
        import signal

        def test_ignores_ctrl_c():
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        def test_catches_ctrl_c():
            signal.signal(signal.SIGINT, lambda signum, frame: None)

        def test_catches_sigterm():
            signal.signal(signal.SIGTERM, lambda signum, frame: None)

        def test_restores_what_it_changed():
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.default_int_handler)

        def test_starts_with_the_defaults_after_a_leak():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, errors=3)  # a teardown error counts beside its passed call
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_ignores_ctrl_c*",
        "*test_leaks.py::test_ignores_ctrl_c left SIGINT's handler as *SIG_IGN*",
        "*ERROR at teardown of test_catches_ctrl_c*",
        "*ERROR at teardown of test_catches_sigterm*",
        "*test_leaks.py::test_catches_sigterm left SIGTERM's handler as <function*",
    ])
