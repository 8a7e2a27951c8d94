"""The relative-position scores of a call whose keys are consecutive steps (attention.py,
shifted_position_scores) against the plain way (naive_cores.gathered_position_scores: q against
every distance's embedding, gathered at each query's and key's distance). Equal, with their
gradients, wherever a key is not in its query's future (the only entries any caller leaves
visible), for any shape."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.cores.attention import shifted_position_scores

from benchmarks.naive_cores import consecutive_steps_back, gathered_position_scores


@settings(max_examples=60, deadline=None)
@given(queries=st.integers(1, 12), keys=st.integers(1, 20), positions=st.integers(1, 24), newest=st.sampled_from([0, 1]),
       seed=st.integers(0, 2**16))
def test_shifted_scores_equal_the_gathered_ones_where_a_key_is_not_in_its_querys_future(queries, keys, positions, newest, seed):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, queries, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    position = torch.randn(positions, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    expected = gathered_position_scores(q, position, keys, newest)
    got = shifted_position_scores(q, position, keys, newest)
    assert got.shape == expected.shape == (2, 3, queries, keys)
    past = consecutive_steps_back(queries, keys, newest) >= 0  # (Q, K): the key is the query's own step or before it
    torch.testing.assert_close(got * past, expected * past, rtol=0, atol=1e-12)
    cotangent = torch.randn(got.shape, generator=generator, dtype=torch.float64) * past
    grads = torch.autograd.grad((got * cotangent).sum(), [q, position])
    expected_grads = torch.autograd.grad((expected * cotangent).sum(), [q, position])
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-12)


def test_a_key_newer_than_the_step_before_the_last_query_is_refused():
    with pytest.raises(ValueError, match="newest must be 0 or 1.*got 2"):
        shifted_position_scores(torch.zeros(1, 1, 3, 4), torch.zeros(5, 4), 4, 2)
