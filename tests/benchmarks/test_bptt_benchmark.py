"""benchmarks/bptt.py runs the linear memories (one short round) and reports, beside seconds per
update, what each window step beyond the rollout adds."""

from benchmarks import bptt


def test_one_short_round_of_the_linear_memories(capsys):
    per_update = bptt.main(["--cores", "ffm", "lru", "--windows", "1", "2", "--updates", "1", "--rounds", "1"])
    assert set(per_update) == {(core, windows, True) for core in ("ffm", "lru") for windows in (1, 2)}
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("| ffm", "| lru"))]
    for line, (core, windows, _) in zip(rows, per_update):
        cells = line.strip("| ").split(" | ")
        assert cells[:4] == [core, "packed", str(windows), str(windows * 32)]
        beyond = (per_update[core, windows, True] - per_update[core, 1, True]) / 32 * 1e3
        assert cells[6] == ("–" if windows == 1 else f"{beyond:.3f}")
