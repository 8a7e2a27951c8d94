"""benchmarks/cpp_dispatch.py: an ATen operation dispatched from C++ costs a fraction of the same
from Python (which goes through C++'s dispatch too), and more than nothing."""

from benchmarks.cpp_dispatch import cpp_dispatch_cost
from benchmarks.op_replay import call_overhead


def test_dispatch_from_cpp_is_cheaper_than_from_python_and_not_free():
    from_cpp = cpp_dispatch_cost(0.05)
    assert from_cpp is not None, "the loop did not build: gcc and ninja are on every machine here"
    assert 1e-9 < from_cpp < call_overhead(0.05)
