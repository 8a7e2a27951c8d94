"""benchmarks/op_replay.py: every ATen operation of a call recorded once per distinct layout and
arguments, counted, and replayed alone on fresh tensors of the same layout, however the call's
tensors were laid out (strided slots, expanded tensors, bools, indices)."""

import pytest
import torch

from benchmarks.op_replay import call_overhead, l2_cache_bytes, replayed_floor


def test_each_distinct_operation_is_counted_per_step_and_replayed_alone():
    buffer, mask, index = torch.zeros(4, 9), torch.rand(4, 9) < 0.5, torch.tensor([0, 2])
    row = torch.randn(1, 9).expand(4, 9)  # stride 0 along its first dimension

    def call():
        for slot in range(3):
            buffer[:, slot].copy_(torch.ones(4))  # the same layout each time: one operation counted 3 times
        buffer.masked_fill_(mask, 0.0)
        torch.add(row, buffer).index_select(0, index)

    replayed, overhead = replayed_floor(call, calls_per_step=2.0, seconds=0.001)
    operations = replayed[0]
    by_name = {}
    for op in operations:
        by_name.setdefault(op.name, []).append(op)
    assert [op.per_step for op in by_name["copy_"]] == [1.5] and by_name["copy_"][0].shapes == [(4,), (4,)]
    assert [op.per_step for op in by_name["masked_fill_"]] == [0.5]
    assert by_name["add"][0].shapes == [(4, 9), (4, 9)] and by_name["index_select"][0].shapes == [(4, 9), (2,)]
    assert all(op.seconds > 0 for op in operations) and 0 < overhead < 1e-3
    assert [op.seconds for op in operations] == sorted((op.seconds for op in operations), reverse=True)


def test_replay_leaves_the_call_s_tensors_alone_and_the_denormal_flag_as_torch_has_it():
    buffer = torch.zeros(3, 3)
    replayed_floor(lambda: buffer.add_(1.0), calls_per_step=1.0, evict_bytes=(0, 2**16), seconds=0.001)
    assert torch.equal(buffer, torch.ones(3, 3))  # recorded once, then replayed on its own tensors
    subnormal = torch.tensor([1e-39])  # float32's smallest normal number is 1.2e-38
    assert (subnormal * 1.0).item() == pytest.approx(1e-39, rel=1e-3)  # not flushed to zero: the flag is put back


def test_replay_out_of_the_cache_takes_copies_in_turn_and_counts_the_same():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    ways, _ = replayed_floor(lambda: torch.mm(a, b), calls_per_step=1.0, evict_bytes=(0, 4 * l2_cache_bytes()), seconds=0.001)
    warm, cold = ways[0], ways[4 * l2_cache_bytes()]
    assert [(op.name, op.shapes, op.per_step) for op in cold] == [(op.name, op.shapes, op.per_step) for op in warm] == [("mm", [(64, 64), (64, 64)], 1.0)]


def test_the_l2_cache_is_read_from_the_machine_or_defaults():
    assert 2**16 <= l2_cache_bytes() <= 2**30


def test_the_dispatch_overhead_is_a_few_microseconds():
    assert 0 < call_overhead(0.05) < 1e-4
