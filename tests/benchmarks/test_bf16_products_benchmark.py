"""benchmarks/bf16_products.py runs end to end (one short round) and reports bfloat16's time over
float32's for every product shape it lists."""

from benchmarks import bf16_products


def test_one_short_round_reports_a_ratio_for_every_shape(capsys):
    ratios = bf16_products.main(["--seconds", "0", "--rounds", "1"])
    out = capsys.readouterr().out
    assert set(ratios) == {what for what, *_ in bf16_products.SHAPES}
    assert all(ratio > 0 for ratio in ratios.values())
    assert all(f"| {what} |" in out for what in ratios)
