"""benchmarks/episode_keys.py runs end to end (one short round): its five rows and the verdicts,
and the core's key rule, query chunk and position scores put back after."""

import pytest

from agents.cores import attention, transformer
from benchmarks import episode_keys


def test_one_short_round_reports_the_five_rows_and_the_verdicts(capsys):
    rule, chunk, scores = transformer.first_seen_key, transformer.QUERY_CHUNK, attention.shifted_position_scores
    assert episode_keys.main(["--length", "8", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    for row in ("| all S + T, one matrix |", "| the seen, one matrix |", "| the seen, by query chunks |", "| and positions shifted |",
                "| and the top layer from the rollout |", "episode's work at L = 8, all keys in one matrix / the default",
                "episode's work at L = 8, positions gathered / shifted", "episode's work at L = 8, the top layer from every step / from the rollout"):
        assert row in out
    assert transformer.first_seen_key is rule and transformer.QUERY_CHUNK == chunk and attention.shifted_position_scores is scores


def test_a_length_below_1_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as exit:
        episode_keys.main(["--length", "0"])
    assert exit.value.code == 2
    assert "--length must be >= 1, got 0" in capsys.readouterr().err
