"""The Transformer's windowed attention (transformer.WINDOWED_FROM, attention.attend): a call much
longer than its span attends over each query's own S + 1 keys instead of a (T, S + T) matrix of
which all but S + 1 columns a row are masked. The same function: outputs, every gradient and the
state equal the full matrix's, for any call length, span, episode starts and variant (the
reservoirs built on the Transformer included), and the naive step-by-step reference's; dropout in
training keeps the full matrix, whose masks it draws."""

import torch
from hypothesis import given, settings, strategies as st

from agents.cores import make_core, transformer
from benchmarks.naive_cores import NaiveTransformer
from tests.cores.test_interface import INPUT_DIM, attention_options, tensors

FULL, ALWAYS = 10**9, 1  # WINDOWED_FROM: never windows; windows whenever a query's S + 1 keys are fewer than the call's


def core_of(name: str, options: dict, seed: int, dtype=torch.float32):
    torch.manual_seed(seed)
    core = make_core(name, INPUT_DIM, **options).to(dtype).eval()
    with torch.no_grad():
        for p in core.parameters():
            if p.requires_grad:
                p.add_(0.3 * torch.randn_like(p))
    return core


def call(core, x, first, windowed_from: int):
    """Outputs, the gradients of a fixed loss over them (every parameter and x), the state, with
    transformer.WINDOWED_FROM at `windowed_from` for the call."""
    x = x.clone().requires_grad_(True)
    default, transformer.WINDOWED_FROM = transformer.WINDOWED_FROM, windowed_from
    try:
        y, state = core(x, core.initial_state(x.shape[1], "cpu"), first)
    finally:
        transformer.WINDOWED_FROM = default
    weights = torch.linspace(-1, 1, y.numel()).view_as(y)
    params = [p for p in core.parameters() if p.requires_grad]
    grads = torch.autograd.grad((y * weights).sum(), [x, *params], allow_unused=True)
    return y.detach(), [torch.zeros_like(p) if g is None else g for p, g in zip([x, *params], grads)], state


@st.composite
def long_calls(draw):
    """A Transformer or a reservoir built on it, in float64 (the two sum in other orders: float64
    leaves no room for rounding to hide a difference), and a call of up to 32 steps with episode starts."""
    name = draw(st.sampled_from(["transformer", "transformer", "reservoir"]))
    options = draw(attention_options(feedback=False))
    if name == "reservoir":
        options.update(kind=draw(st.sampled_from(["ffn", "transformer"])), n_reservoir=draw(st.integers(1, options["n_layers"])))
    steps, batch = draw(st.integers(1, 32)), draw(st.integers(1, 3))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    first = torch.rand(steps, batch, generator=generator) < draw(st.sampled_from([0.0, 0.1, 0.3]))
    x = torch.randn(steps, batch, INPUT_DIM, generator=generator, dtype=torch.float64)
    return core_of(name, options, draw(st.integers(0, 99)), torch.float64), x, first


@settings(max_examples=25, deadline=None)
@given(case=long_calls())
def test_windows_compute_what_the_full_matrix_does(case):
    core, x, first = case
    y, grads, state = call(core, x, first, ALWAYS)
    y_full, grads_full, state_full = call(core, x, first, FULL)
    assert_same_in_float64(([y], grads, state), ([y_full], grads_full, state_full))


def assert_same_in_float64(got: tuple, want: tuple) -> None:
    """Two (outputs, gradients, state) of float64 calls equal to its rounding: the outputs and
    the state to 1e-10, the gradients (sums of more terms) to 1e-9."""
    (outputs, grads, state), (outputs_want, grads_want, state_want) = got, want
    for tolerance, pairs in ((1e-10, zip(outputs, outputs_want, strict=True)), (1e-9, zip(grads, grads_want, strict=True)),
                             (1e-10, zip(tensors(state), tensors(state_want), strict=True))):
        for a, b in pairs:
            torch.testing.assert_close(a, b, atol=tolerance, rtol=tolerance)


def test_a_long_call_takes_windows_by_default_and_matches_the_naive_reference():
    """40 steps at span 2 (8 x 3 keys <= 42): windows by default; the naive reference steps the
    Transformer one query at a time."""
    core = core_of("transformer", dict(d_model=8, n_heads=2, n_layers=2, span=2), seed=1)
    x = torch.randn(40, 3, INPUT_DIM)
    first = torch.rand(40, 3, generator=torch.Generator().manual_seed(2)) < 0.1
    y, _ = core(x, core.initial_state(3, "cpu"), first)
    reference = NaiveTransformer(core)
    expected, _ = reference(x, reference.initial_state(3, "cpu"), first)
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=0)
    distance, visible = core._visible(torch.zeros(40, 3, dtype=torch.long), 40)
    assert distance.shape == (1, 3) and visible.shape == (3, 40, 3)


def test_dropout_in_training_keeps_the_full_matrix(monkeypatch):
    """Dropout draws its masks over the attention weights' shape: in training the call keeps the
    full matrix, so the masks, and so the run, are the ones drawn before windows existed."""
    core = make_core("transformer", INPUT_DIM, d_model=8, n_heads=2, n_layers=1, span=2, dropout=0.2).train()
    x, first = torch.randn(40, 2, INPUT_DIM), torch.zeros(40, 2, dtype=torch.bool)
    outputs = []
    for windowed_from in (ALWAYS, FULL):
        monkeypatch.setattr(transformer, "WINDOWED_FROM", windowed_from)
        torch.manual_seed(3)
        outputs.append(core(x, core.initial_state(2, "cpu"), first)[0])
    assert torch.equal(*outputs)
    monkeypatch.undo()  # the default rule
    assert core._visible(torch.zeros(40, 2, dtype=torch.long), 40)[1].shape == (2, 40, 42)
    core.eval()
    assert core._visible(torch.zeros(40, 2, dtype=torch.long), 40)[1].shape == (2, 40, 3)


def test_a_short_call_keeps_the_full_matrix():
    """Windows pay only where a query's S + 1 keys are a small part of the call's (WINDOWED_FROM)."""
    core = make_core("transformer", INPUT_DIM, d_model=8, n_heads=2, n_layers=1, span=16).eval()
    assert core._visible(torch.zeros(32, 2, dtype=torch.long), 32)[1].shape == (2, 32, 48)
    assert core._visible(torch.zeros(136, 2, dtype=torch.long), 136)[1].shape == (2, 136, 17)


def test_windows_run_on_the_meta_device():
    """No stray host tensor and no read-back in the windowed call (tests/cores/test_meta_device.py says why meta)."""
    meta = torch.device("meta")
    core = make_core("transformer", INPUT_DIM, d_model=8, n_heads=2, n_layers=2, span=2).to(meta).train()
    x = torch.randn(40, 3, INPUT_DIM, device=meta, requires_grad=True)
    y, state = core(x, core.initial_state(3, meta), torch.zeros(40, 3, dtype=torch.bool, device=meta))
    assert core._visible(torch.zeros(40, 3, dtype=torch.long, device=meta), 40)[1].shape == (3, 40, 3)
    y.sum().backward()
    assert y.device == meta and x.grad.device == meta and all(t.device == meta for t in tensors(state))
