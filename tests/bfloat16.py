"""Tolerances for comparing a bfloat16 computation with the same one in float32, derived from the dtype.

bfloat16 keeps 8 significant bits: a rounding is off by at most half an ulp, the unit roundoff
u = 2**-8 of the value, and float32's errors (u = 2**-24) are nothing beside it. Which values a
result went through, each rounded, sets its error:

- a Linear (addmm) reads its input and its weight rounded (2 roundings), sums their products
  in float32 inside the kernel and rounds the output (1): 3 per product;
- a LayerNorm: its weight, its bias and its output (its statistics are float32): 3;
- an attention layer: norm 3, query 3, keys and values 3, scores 3, softmax 2, context 3,
  output 3, residual 1 (21); its feed-forward sublayer: norm 3, two Linears 6, residual 1 (10):
  ROUNDINGS_PER_LAYER = 32 bounds a layer of any core here (an LSTM layer's two products, four
  gates and two updates come to about 12; the Feedback memory's mix and projection to 9 more);
- a core's input embedding 3 and output norm 3: 6 per step;
- a step sees earlier steps (memory, recurrence, attention over the span), each bringing its own
  roundings: at most all T steps of the call.

So a core's output takes at most k = T (6 + 32 L) roundings along one path. They are about
independent, each uniform within +-u (standard deviation u / sqrt 3), and the maps between them
are close to norm-preserving at these weights (LayerNorm renormalises; a default-initialised
Linear's norm is about 1), so their sum has a standard deviation of u sqrt(k / 3) at the scale of
the values. A test compares some hundreds of values; the largest of 1,000 normal deviates is
about 3.7 standard deviations, hence TAIL = 4. A gradient goes through the forward's path and
back: 2 k. A real mistake (a mask lost, a term dropped, a buffer in the wrong dtype) moves
results by their own size, far beyond these tolerances.
"""

import math

UNIT_ROUNDOFF = 2.0**-8
ROUNDINGS_PER_LAYER = 32
ROUNDINGS_PER_STEP = 6  # the input embedding and the output norm
TAIL = 4.0


def roundings(steps: int, layers: int) -> int:
    """k: the roundings along one path to an output of a core of `layers` layers over `steps` steps."""
    return steps * (ROUNDINGS_PER_STEP + ROUNDINGS_PER_LAYER * layers)


def bf16_tolerance(roundings: int) -> float:
    """Relative tolerance for a bfloat16 result that went through `roundings` roundings."""
    return TAIL * UNIT_ROUNDOFF * math.sqrt(roundings / 3)


def close_bf16(roundings: int, scale: float = 1.0) -> dict[str, float]:
    """rtol and atol for torch.testing.assert_close, as tests/float32.py's close32: `scale` is the
    size of the values, which sets the error of a result near zero."""
    tolerance = bf16_tolerance(roundings)
    return {"rtol": tolerance, "atol": tolerance * scale}
