"""The Feedback core's fused path (steps outside autograd, backward by hand: feedback_step.py)
against its reference (fused=False: the same step code under plain autograd), and the step code
traced by torch.compile with no graph break."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.cores import make_core
from agents.cores.feedback_step import layer_backward, layer_forward

INPUT_DIM = 5


@st.composite
def configurations(draw):
    heads = draw(st.integers(1, 3))
    return {
        "n_heads": heads,
        "d_model": heads * draw(st.sampled_from([4, 6])),
        "n_layers": draw(st.integers(1, 3)),
        "span": draw(st.integers(1, 6)),
        "pre_norm": draw(st.booleans()),
        "persistent": draw(st.sampled_from([0, 0, 2])),
        "shared_kv": draw(st.booleans()),
        "dropout": draw(st.sampled_from([0.0, 0.0, 0.3])),
    }


def build(options: dict, seed: int, fused: bool) -> torch.nn.Module:
    """A float64 core in train mode (dropout on where configured) with weights off their initial values."""
    torch.manual_seed(seed)
    core = make_core("feedback", INPUT_DIM, **options, fused=fused).double().train()
    with torch.no_grad():
        for p in core.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return core


def outputs_and_gradients(core, x, first, state, weights, seed):
    torch.manual_seed(seed)  # the same dropout masks for both paths
    y, after = core(x, state, first)
    params = list(core.parameters())
    grads = torch.autograd.grad((y * weights).sum(), [x, *params], allow_unused=True)
    return y.detach(), after, [g if g is not None else torch.zeros_like(p) for g, p in zip(grads, [x, *params])]


@settings(derandomize=True, max_examples=30, deadline=None)
@given(options=configurations(), seed=st.integers(0, 2**16), steps=st.integers(1, 9), batch=st.integers(1, 3),
       reset=st.sampled_from([0.0, 0.2, 0.5]), carried=st.integers(1, 8))
def test_fused_equals_the_plain_autograd_reference(options, seed, steps, batch, reset, carried):
    """Outputs, state and every gradient (inputs and weights) agree in float64, with memory carried
    in from an earlier call (its keys recomputed with gradients), resets anywhere, dropout,
    persistent vectors, shared or per-layer key/value projections, pre- or post-norm."""
    fused, reference = build(options, seed, True), build(options, seed, False)
    torch.manual_seed(seed + 1)
    x0 = torch.randn(carried, batch, INPUT_DIM, dtype=torch.float64)
    x = torch.randn(steps, batch, INPUT_DIM, dtype=torch.float64, requires_grad=True)
    first = torch.rand(steps, batch) < reset
    weights = torch.randn(steps, batch, options["d_model"], dtype=torch.float64)
    results = []
    for core in (fused, reference):
        torch.manual_seed(seed + 2)  # the carried call's dropout masks, alike for both
        with torch.no_grad():
            _, state = core(x0, core.initial_state(batch, "cpu"), torch.zeros(carried, batch, dtype=torch.bool))
        results.append(outputs_and_gradients(core, x, first, state, weights, seed))
    (y, after, grads), (y_ref, after_ref, grads_ref) = results
    torch.testing.assert_close(y, y_ref, atol=1e-10, rtol=1e-10)
    for name, g, e in zip(["x", *(n for n, _ in fused.named_parameters())], grads, grads_ref):
        torch.testing.assert_close(g, e, atol=1e-10, rtol=1e-10, msg=name)
    end, end_ref = after.end, after_ref.end
    torch.testing.assert_close(after.memory[:, end - options["span"] : end], after_ref.memory[:, end_ref - options["span"] : end_ref])
    assert torch.equal(after.valid, after_ref.valid)


def test_gradcheck_through_the_hand_written_backward():
    """torch.autograd.gradcheck (finite differences, float64) of the fused call with respect to its
    inputs and weights of every kind: a query projection, the shared key/value projection and its
    norm, a feed-forward layer, the position table, the layer mix."""
    core = build(dict(d_model=4, n_heads=2, n_layers=2, span=3), 0, True).eval()
    first = torch.tensor([[True, False], [False, False], [False, True], [False, False]])
    with torch.no_grad():
        _, state = core(torch.randn(3, 2, INPUT_DIM, dtype=torch.float64), core.initial_state(2, "cpu"), torch.zeros(3, 2, dtype=torch.bool))
    names = ["blocks.0.query.weight", "kv.0.weight", "memory_norm.0.weight", "blocks.1.ff.fc1.weight", "blocks.1.position", "layer_logits"]
    params = dict(core.named_parameters())
    leaves = [params[n].detach().clone().requires_grad_(True) for n in names]
    x = torch.randn(4, 2, INPUT_DIM, dtype=torch.float64, requires_grad=True)

    def call(x, *weights):
        return torch.func.functional_call(core, dict(zip(names, weights)), (x, state, first))[0]

    assert torch.autograd.gradcheck(call, (x, *leaves), fast_mode=True)  # fast mode: random projections of the Jacobian


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("persistent", [0, 2])
def test_step_code_compiles_with_no_graph_break(pre_norm, persistent):
    """layer_forward and layer_backward trace whole under torch.compile(fullgraph=True) (no host
    synchronisation, no data-dependent Python control flow) and compute the same as eagerly.
    The eager backend checks the tracing without paying for code generation."""
    options = dict(d_model=8, n_heads=2, n_layers=1, span=4, pre_norm=pre_norm, persistent=persistent, dropout=0.2)
    core = build(options, 0, True)
    _, (layer,), _ = core.call_weights()
    layer = type(layer)(*[w.detach() if w is not None else None for w in layer])
    torch.manual_seed(1)
    B, H, E, S = 3, 2, 4, 4
    h, bias = torch.randn(B, 8, dtype=torch.float64), torch.where(torch.rand(B, 1, S) < 0.3, -1e9, 0.0).double()
    seen = torch.ones(B, 1, 1, dtype=torch.float64)
    k_t, v = torch.randn(B, H, E, S, dtype=torch.float64), torch.randn(B, H, S, E, dtype=torch.float64)
    masks = (torch.rand(B, H, S + persistent, dtype=torch.float64), torch.rand(B, 32, dtype=torch.float64) if not persistent else None)
    torch._dynamo.reset()  # each variant traced afresh (guards cached from another variant's tapes misfire)
    forward = torch.compile(layer_forward, fullgraph=True, backend="eager", dynamic=False)
    backward = torch.compile(layer_backward, fullgraph=True, backend="eager", dynamic=False)
    with torch.no_grad():
        out, tape = forward(h, k_t, v, bias, seen, layer, masks, pre_norm)
        expected, expected_tape = layer_forward(h, k_t, v, bias, seen, layer, masks, pre_norm)
        torch.testing.assert_close(out, expected)
        grads = [torch.zeros(B, H, E, S, dtype=torch.float64) for _ in range(4)]
        accumulators = [type(layer)(*(None if w is None else torch.zeros_like(w) for w in layer)) for _ in range(2)]
        dh = backward(h, k_t.transpose(-1, -2), v.transpose(-1, -2), grads[0], grads[1], seen, layer, tape, masks, pre_norm, accumulators[0])
        dh_eager = layer_backward(h, k_t.transpose(-1, -2), v.transpose(-1, -2), grads[2], grads[3], seen, layer, expected_tape, masks,
                                  pre_norm, accumulators[1])
    torch.testing.assert_close(dh, dh_eager)
    torch.testing.assert_close(grads[0], grads[2])
    torch.testing.assert_close(grads[1], grads[3])
    for compiled, eager in zip(*accumulators):
        if eager is not None:
            torch.testing.assert_close(compiled, eager)
