"""Tolerances for comparing float32 results, derived from the dtype.

float32 keeps 24 significant bits: machine epsilon is 2**-23, about 1.2e-7. Every rounding can be
off by half of that, and which roundings a result takes, in which order, depends on the CPU
(vector width, BLAS and oneDNN kernels, how a reduction is split). So a float32 result matches a
float64 hand computation, or the same maths by another code path, to a few epsilons per
accumulated term, and pytest.approx's default (1e-6 relative, about 8 epsilons) fails on some
machines. These helpers allow EPSILONS_PER_TERM epsilons per term: far above rounding, far below a
real mistake, which shows in the second or third digit.

    from tests.float32 import approx32, close32
    assert loss.item() == approx32(by_hand, terms=4)
    torch.testing.assert_close(got, want, **close32(terms=16))

Results that must be bit-equal (a resumed run against an unstopped one, in one process) are
compared exactly instead.
"""

import pytest
import torch

EPSILON = torch.finfo(torch.float32).eps
EPSILONS_PER_TERM = 256


def float32_tolerance(terms: int = 1) -> float:
    """Relative tolerance for a float32 result that accumulated `terms` rounded terms (a sum of
    that many products, a recursion of that many steps); worst-case errors grow linearly."""
    return EPSILONS_PER_TERM * terms * EPSILON


def approx32(expected, terms: int = 1, scale: float = 1.0):
    """pytest.approx for float32 results. `scale` is the size of the numbers that were summed,
    which sets the error of a result near zero (where a relative tolerance means nothing)."""
    tolerance = float32_tolerance(terms)
    return pytest.approx(expected, rel=tolerance, abs=tolerance * scale)


def close32(terms: int = 1, scale: float = 1.0) -> dict[str, float]:
    """rtol and atol for torch.testing.assert_close or np.testing.assert_allclose, as approx32."""
    tolerance = float32_tolerance(terms)
    return {"rtol": tolerance, "atol": tolerance * scale}
