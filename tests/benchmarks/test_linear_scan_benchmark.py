"""benchmarks/linear_scan.py: its closed form computes linear_scan's states and gradients where it
claims to be exact, it times only there, its choice of chunk and its target on fixed numbers, and
one short run end to end."""

import json

import pytest
import torch

from agents.cores.linear_scan import CHUNK, linear_scan
from benchmarks import linear_scan as benchmark


@pytest.mark.parametrize("chunk", [1, 3, 8, 32])
def test_the_closed_form_equals_the_doubling_scan_with_resets_and_a_carried_state(chunk):
    torch.manual_seed(0)
    steps, batch, units = 20, 3, 5
    decay = torch.polar(torch.empty(units, dtype=torch.float64).uniform_(0.5, 0.999),
                        torch.empty(units, dtype=torch.float64).uniform_(0, 6.3)).requires_grad_()
    inputs = torch.randn(steps, batch, units, dtype=torch.complex128, requires_grad=True)
    state = torch.randn(batch, units, dtype=torch.complex128, requires_grad=True)
    first = torch.rand(steps, batch) < 0.2
    first[0, 0], first[1:, 1] = True, False  # an episode starting at a chunk's first step; one carried throughout
    weight = torch.randn(steps, batch, units, 2, dtype=torch.float64)
    results = []
    for scan, scan_chunk in ((linear_scan, steps), (benchmark.closed_form, chunk)):
        states = scan(decay, inputs, first, state, scan_chunk)
        grads = torch.autograd.grad((torch.view_as_real(states) * weight).sum(), (decay, inputs, state))
        results.append((states, *grads))
    for closed, doubling in zip(results[1], results[0]):
        torch.testing.assert_close(closed, doubling, rtol=1e-9, atol=1e-9)


def test_the_closed_form_is_timed_only_within_its_exact_chunks():
    assert benchmark.closed_form_limit(torch.tensor([0.5, 0.9], dtype=torch.complex64)) == 127  # FFM's fastest initial decay
    assert benchmark.closed_form_limit(torch.tensor([0.9, 0.99], dtype=torch.complex64)) == 829  # LRU's r_min
    assert benchmark.ways(256, 127, [16, 64, 256], [16, 64, 128]) == [
        ("stepwise", 256), ("doubling", 256), ("doubling", 16), ("doubling", 64), ("closed", 16), ("closed", 64)]
    assert benchmark.ways(32, 829, [16, 64], [16, 64, 128]) == [
        ("stepwise", 32), ("doubling", 32), ("doubling", 16), ("closed", 16), ("closed", 32)]


def test_the_chunk_scores_and_the_target_compare_within_the_run():
    # seconds a call at T = 32 and 1,024: chunk 64 fastest at 1,024, the whole call at 32
    times = {("p", 32, "doubling", 32): 1.0, ("p", 32, "doubling", 16): 2.0,
             ("p", 1024, "doubling", 1024): 40.0, ("p", 1024, "doubling", 16): 30.0, ("p", 1024, "doubling", 64): 20.0,
             ("p", 1024, "closed", 64): 10.0}  # the closed form does not count: CHUNK is the doubling scan's
    scores = benchmark.chunk_scores(times, "p", [32, 1024], [16, 64, 1024])
    assert scores == pytest.approx({16: (2.0 * 1.5) ** 0.5, 64: 1.0, 1024: 2.0**0.5})
    verdict = benchmark.target(scores, 64)
    assert verdict.passed and verdict.ratio == 1.0
    verdict = benchmark.target(scores, 16)
    assert not verdict.passed and verdict.ratio == pytest.approx(3**-0.5)
    assert benchmark.target({16: 1.05, 64: 1.0}, 16).passed  # within 1.1x of the fastest


def test_one_short_run_times_every_way_and_writes_them(tmp_path, capsys):
    out = tmp_path / "scan.json"
    benchmark.main(["--lengths", "8", "32", "--chunks", "4", "--closed-chunks", "4", "--batch", "2",
                    "--seconds", "0", "--repeats", "1", "--json", str(out)])
    printed = capsys.readouterr().out
    record = json.loads(out.read_text())
    ways = {(row["problem"], row["T"], row["way"], row["chunk"]) for row in record["rows"]}
    chunks = sorted({4, CHUNK})
    for problem in ("ffm N=128", "lru N=64"):
        assert {(problem, 32, "doubling", k) for k in [32] + [k for k in chunks if k < 32]} <= ways
        assert {(problem, 8, "closed", 4), (problem, 32, "closed", 4), (problem, 8, "stepwise", 8)} <= ways
        assert f"| {problem} | 32 | doubling, whole call |" in printed
    assert all(row["seconds"] > 0 and row["error"] < 1e-5 for row in record["rows"])
    assert record["best_chunk"] in set(chunks) | {32}
    assert f"fastest doubling chunk / CHUNK={CHUNK}, time over the lengths and problems:" in printed
    assert "fastest way / stepwise (the CPU's), the worst problem and T:" in printed
