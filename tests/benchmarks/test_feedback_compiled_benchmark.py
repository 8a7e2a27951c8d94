"""benchmarks/feedback_compiled.py runs end to end (one short round) and reports every path and
its ratios; where the compiled step is unavailable it stops saying so rather than timing the
Python step twice."""

import json
import re

import pytest
import torch

from agents.cores.append_log import HEADROOM

from agents.cores.feedback import compiled as feedback_compiled

from agents.cores import make_core
from benchmarks import feedback_compiled as benchmark


def test_one_short_round_reports_every_path_and_the_ratios(capsys, monkeypatch):
    monkeypatch.setenv(feedback_compiled.SWITCH, "1")  # the benchmark sets it per path; restored after the test
    benchmark.main(["--seconds", "0", "--rounds", "1"])
    out = capsys.readouterr().out
    for path in ("| compiled |", "| fused |", "| lstm |", "learn: compiled / fused time", "act: compiled / fused time"):
        assert path in out


def test_it_refuses_to_run_without_the_compiled_step(monkeypatch):
    monkeypatch.setattr(feedback_compiled, "extension", lambda: None)
    with pytest.raises(SystemExit, match="the compiled Feedback step is not available here"):
        benchmark.main(["--seconds", "0", "--rounds", "1"])


def test_the_acting_split_adds_up_and_puts_the_compiled_step_back(capsys, monkeypatch):
    """--profile's acting split: the C++ calls (the first acting call's forward_steps, then
    act_steps), the buffers' refill and the Python around them add up to the calls, each part
    is there (70 calls from an empty state refill once, at HEADROOM), and what it wrapped to time
    them (the compiled step's functions, the core's _room) is put back."""
    monkeypatch.setenv(feedback_compiled.SWITCH, "1")
    compiled = feedback_compiled.extension()
    forward_steps, act_steps = compiled.forward_steps, compiled.act_steps
    core = make_core("feedback", 3, d_model=8, n_heads=2, span=4)
    state, x, first = core.initial_state(2, "cpu"), torch.randn(1, 2, 3), torch.zeros(1, 2, dtype=torch.bool)
    split = benchmark.split_acting(core, state, x, first, calls=HEADROOM + 6)
    assert split["steps"] > 0 and split["refill"] > 0 and split["python"] > 0
    assert split["steps"] + split["refill"] + split["python"] == pytest.approx(split["call"])
    assert re.search(r"acting: \d+ us a call; in C\+\+ \d+ us .*room .*\d+ us .*around them \d+ us", capsys.readouterr().out)
    assert feedback_compiled.extension() is compiled and (compiled.forward_steps, compiled.act_steps) == (forward_steps, act_steps)
    assert "_room" not in vars(core)


def test_the_scaling_table_times_every_model_at_every_batch(capsys, monkeypatch):
    """--scaling: the learning pass per step of each span's compiled core and of the LSTM at each
    batch, every cell timed (a positive median), in the table, and the two derived shares said."""
    monkeypatch.setenv(feedback_compiled.SWITCH, "1")
    median = benchmark.learning_scaling(rounds=1, seconds=0)
    models = [f"feedback span {span}" for span in benchmark.SCALING_SPANS] + ["lstm"]
    assert set(median) == {(model, batch) for model in models for batch in benchmark.SCALING_BATCHES}
    assert all(seconds > 0 for seconds in median.values())
    out = capsys.readouterr().out
    for model in models:
        row = re.search(rf"\| {model} \|((?: [0-9.]+ \|)+)", out)
        assert row and len(row.group(1).split("|")) - 1 == len(benchmark.SCALING_BATCHES), out
    assert re.search(r"a step's cost at B 1 \d+% of the span-64 step; span 64 less span 2 -?[0-9.]+ ms \(-?\d+%\)", out), out


def test_the_recall_call_times_the_carry_the_tanh_write_and_the_papers_model_on_each_step(capsys, monkeypatch, tmp_path):
    """--recall: a recall episode's learning call of each of RECALL's cores (the carry, the tanh
    write and the paper's model, each step), a positive median and its rounds in the table, the ratios said;
    --json writes them with the command and the table's medians."""
    monkeypatch.setenv(feedback_compiled.SWITCH, "1")
    written = tmp_path / "speed.json"
    benchmark.main(["--seconds", "0", "--rounds", "1", "--recall", "--json", str(written)])
    out = capsys.readouterr().out
    for name in benchmark.RECALL:
        assert re.search(rf"\| {name} \| \d+ \| \d+ \|", out), out
    assert re.search(r"carry compiled / carry python [0-9.]+; carry compiled / paper compiled [0-9.]+; "
                     r"tanh compiled / tanh python [0-9.]+; tanh compiled / paper compiled [0-9.]+", out), out
    record = json.loads(written.read_text())
    assert record["command"].endswith(f"--recall --json {written}") and record["recall"]["steps"] == benchmark.RECALL_LENGTH + 1
    assert set(record["recall"]["median_ms"]) == set(benchmark.RECALL) and all(ms > 0 for ms in record["recall"]["median_ms"].values())
    assert set(record["ms"]) == {f"{path} {mode}" for path in benchmark.PATHS for mode in ("learn", "act")}


def test_the_step_roofline_counts_every_operation_once_at_its_shape_and_adds_the_loops(capsys):
    """--profile's roofline of the learning pass: every mm, addmm and addmm_ of a learning call
    counted once with its shape's operations, per step of the call (LEARN_STEPS of them), the
    other operations in their groups, each timed when replayed, and the attention loops' bound
    added as given."""
    m, k, n = 96, 80, 112  # products of tens of microseconds, well above a replay's dispatch
    a, b, bias, acc, buffer = torch.randn(m, k), torch.randn(k, n), torch.randn(n), torch.zeros(k, n), torch.zeros(4, 9)

    def learn():
        torch.mm(a, b)
        torch.mm(a, b)
        torch.addmm(bias, a, b)
        acc.addmm_(a.t(), torch.randn(m, n))  # (k, m) @ (m, n)
        buffer[:, 3].copy_(torch.ones(4))  # a slot written into a strided buffer
        torch.layer_norm(b, (n,))

    step = benchmark.step_roofline(learn, step_seconds=1.0, loops_bound=("in-cache rate", 0.25), replay_seconds=0.005)
    assert step["calls"] == pytest.approx(4 / benchmark.LEARN_STEPS)
    assert step["flops"] == pytest.approx((3 * 2 * m * k * n + 2 * k * m * n) / benchmark.LEARN_STEPS)
    for way in ("warm", "out of L2"):
        groups = step[way]["groups"]
        assert groups["attention loops (in-cache rate)"] == 0.25 and step[way]["floor"] == pytest.approx(sum(groups.values()))
        assert {"products", "copies", "layer norms"} <= set(groups) and groups["products"] > 0
        # 6 operations' dispatch, in seconds a step: the bound (100 us an operation) checks the unit, not
        # the speed (about 1 us on an idle CPU, several under load; speed targets live in benchmarks/)
        assert 0 < groups["C++ dispatch of the operations"] < 6 * 1e-4 / benchmark.LEARN_STEPS
    out = capsys.readouterr().out
    assert "products: 0.1 calls a step" in out
    assert re.search(r"in all +[0-9.]+ +[0-9.]+  against 1000.000 measured \(\d+.\d+ timed again after the replays\): measured / floor warm [0-9.]+, out of L2 [0-9.]+", out), out


def test_a_rate_is_given_only_where_the_products_took_time():
    assert benchmark.gigaflops(2e9, 0.5) == "4 GFLOP/s"
    assert benchmark.gigaflops(2e9, 0.0) == "within the dispatch's time: no rate"  # tiny products, all within the dispatch taken off


def test_the_loops_in_cache_rate_is_a_time_per_env_of_the_compiled_loops():
    """From two small batches' learning calls: positive, and under the learning pass of one
    env a step (the loops are part of it); seconds, not microseconds."""
    if benchmark.feedback_compiled.extension() is None:
        pytest.fail("the compiled Feedback step did not build (the test machines have a compiler)")
    per_env = benchmark.loops_in_cache(calls=2, repeats=3)
    assert 0 < per_env < 1e-3, per_env
