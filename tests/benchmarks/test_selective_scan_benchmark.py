"""benchmarks/selective_scan.py: one short run times both ways of the scan with per-step decays at
every width and length asked for, names the way linear_scan picks, and writes its verdict."""

import json

import pytest

from agents.cores import linear_scan as scan_module
from benchmarks import selective_scan as benchmark


def test_one_short_run_times_both_ways_at_every_cell_and_writes_the_verdict(tmp_path, capsys):
    out = tmp_path / "scan.json"
    benchmark.main(["--units", "2", "8", "--lengths", "5", "9", "--batch", "3", "--seconds", "0.001", "--repeats", "1", "--json", str(out)])
    printed = capsys.readouterr().out
    record = json.loads(out.read_text())
    assert sorted((row["steps"], row["width"]) for row in record["rows"]) == [(5, 6), (5, 24), (9, 6), (9, 24)]
    assert all(row["stepwise_seconds"] > 0 and row["doubling_seconds"] > 0 and row["picked"] == "stepwise" for row in record["rows"])
    assert record["stepwise_devices"] == list(scan_module.STEPWISE_DEVICES) == ["cpu"]
    assert "| 9 | 24 |" in printed and "faster way / the way linear_scan picks, the worst cell:" in printed
    assert record["target"]["ratio"] <= 1.0 and record["target"]["passed"] == (record["target"]["ratio"] >= record["target"]["at_least"])


@pytest.mark.parametrize("argv, named", [(["--units", "0"], "--units must be >= 1, got [0]"),
                                         (["--seconds", "0"], "--seconds > 0, got 64, 5, 0.0")])
def test_a_bad_flag_is_refused_naming_its_value(argv, named, capsys):
    with pytest.raises(SystemExit) as exit:
        benchmark.main(argv)
    assert exit.value.code == 2 and named in capsys.readouterr().err


def test_whole_updates_are_timed_with_each_way_in_one_trainer(monkeypatch):
    small = [arg.replace("length=128", "length=4") for arg in benchmark.TRAIN_ARGS] + ["--num-envs", "4", "--rollout", "8"]
    monkeypatch.setattr(benchmark, "TRAIN_ARGS", small)
    rates = benchmark.training_rates("lru", repeats=2)
    assert sorted(rates) == ["doubling", "stepwise"] and all(len(v) == 2 and min(v) > 0 for v in rates.values())
    assert scan_module.STEPWISE_DEVICES == ("cpu",)  # put back after each sample
