"""The feed-forward attention diagnostics (issue 24): the measurements the diagnosis rests on."""

import pytest

from experiments import ffattn_diagnostics


@pytest.mark.parametrize("init", ffattn_diagnostics.INITS)
def test_the_marker_weights_gradient_shrinks_as_one_over_length_and_the_heads_does_not(init):
    short, long = (ffattn_diagnostics.init_stats(length, init, seed=0) for length in (100, 1000))
    ratio = short["grad_norm_marker_column"] / long["grad_norm_marker_column"]
    assert 5 < ratio < 30  # 4 marked steps of L: about 10 from L = 100 to 1,000 (8.9 and 20.6 measured)
    head = short["grad_norm"]["hidden.weight"] / long["grad_norm"]["hidden.weight"]
    assert 0.5 < head < 2.5  # W_cs's gradient does not follow L (0.91 and 2.0 measured)
    assert -1 < short["score_range"][0] <= short["score_range"][1] < 1  # tanh scores
    assert short["marked_weight_reachable_x_L_over_2"] < 7.39  # at most e^2 times the mean's weight


def test_the_generator_matches_the_authors_adding_problem():
    stats = ffattn_diagnostics.data_stats(100, seed=0)
    assert stats["target_is_0.5_plus_sum_over_4"] and stats["end_markers_minus_1"]
    assert stats["first_marked"] == [1, 9] and stats["second_marked"][1] <= 49
    assert -1 <= stats["values"][0] < -0.99 and 0.99 < stats["values"][1] <= 1
