"""Every core in bfloat16 against itself in float32: under torch.autocast (float32 weights, the
way a GPU trains) and cast (core.to(torch.bfloat16)), outputs and gradients (inputs and
weights), a whole call and acting a step at a time, within tolerances derived from bfloat16's
unit roundoff and the size of the computation (tests/bfloat16.py derives them). Also: masked
scores stay finite in float16, where the old fixed -1e9 overflowed to -inf.

Gradients are compared with float32 only where a core has no ReLU. A ReLU has no derivative at
0: a unit whose pre-activation lies within its rounding error of 0 is on in one dtype and off
in the other, and its whole share of the gradient moves, not a rounding of it (one such unit in
32 moved a gradient by 40 % at a batch of 3). The all-attention variants (persistent vectors in
place of the ReLU feed-forward sublayer), the LSTM and GRU, the echo-state core, the MLP (tanh)
and Mamba (SiLU, softplus) are smooth. The same holds against the Feedback reference model
(feedback/reference.py), whose forward rounds differently: the Feedback core's hand-written backward is compared with it under
autocast for the smooth variants only; with the ReLU sublayer, it is compared with the
reference in float32 and float64 (test_feedback_paths.py) and its outputs here.
"""

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.cores import cpu_kernels, make_core
from agents.cores.dtypes import masked_score
from agents.cores.feedback.reference import reference_of
from tests.bfloat16 import close_bf16, roundings

INPUT_DIM, BATCH = 5, 3
ATTENTION = dict(d_model=8, n_heads=2, n_layers=2, span=4)
CORES = {  # name: (core, options, layers on a path)
    "feedback": ("feedback", ATTENTION, 2),
    "feedback-post-norm-per-layer-kv": ("feedback", {**ATTENTION, "pre_norm": False, "shared_kv": False}, 2),
    "feedback-persistent": ("feedback", {**ATTENTION, "persistent": 2}, 2),
    # the carry's and the kept slot's gates (a Linear, a sigmoid), their blends and the tanh: about 15
    # roundings a step more (tests/bfloat16.py's count), within a third layer's 32
    "feedback-keeping": ("feedback", {**ATTENTION, "carry": "gate", "keep_slot": True, "memory_write": "tanh"}, 3),
    "feedback-persistent-post-norm-per-layer-kv": ("feedback", {**ATTENTION, "persistent": 2, "pre_norm": False, "shared_kv": False}, 2),
    "transformer": ("transformer", ATTENTION, 2),
    "transformer-persistent": ("transformer", {**ATTENTION, "persistent": 2}, 2),
    "transformer-gtrxl": ("transformer", {**ATTENTION, "gating": "gru"}, 2),  # (a ReLU on each sublayer's output: not smooth)
    "transformer-gtrxl-persistent": ("transformer", {**ATTENTION, "gating": "gru", "persistent": 2}, 2),
    "reservoir-ffn": ("reservoir", ATTENTION, 3),  # 2 trained layers and a frozen one
    "reservoir-esn": ("reservoir", {"kind": "esn", "units": 16, "d_model": 8}, 1),
    "lstm": ("lstm", {"hidden_size": 8, "n_layers": 2}, 2),
    "gru": ("gru", {"hidden_size": 8, "n_layers": 2}, 2),
    "mlp": ("mlp", {"hidden_size": 8, "n_layers": 2}, 2),
    "ffm": ("ffm", {"d_model": 8, "memory_size": 4, "context_size": 2}, 1),
    "lru": ("lru", {"d_model": 8, "state_size": 6, "n_layers": 2}, 2),
    "mamba": ("mamba", {"d_model": 8, "d_state": 4, "n_layers": 2}, 2),
}
SMOOTH = ("feedback-persistent", "feedback-persistent-post-norm-per-layer-kv", "transformer-persistent", "reservoir-esn", "lstm", "gru", "mlp",
          "mamba")
OPENS = ("feedback-persistent", "lstm", "gru")
AUTOCAST = torch.autocast("cpu", dtype=torch.bfloat16)


def build(name: str, seed: int, **changes) -> tuple[torch.nn.Module, int]:
    core, options, layers = CORES[name]
    torch.manual_seed(seed)
    return make_core(core, INPUT_DIM, **options, **changes).eval(), layers


def case(seed: int, steps: int, reset: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x (T, B, I), first (T, B) with resets, and fixed weights r (T, B, D') for the loss sum(y r)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, BATCH, INPUT_DIM, generator=generator)
    first = torch.rand(steps, BATCH, generator=generator) < reset
    return x, first, torch.randn(steps, BATCH, 64, generator=generator)


def outputs_and_gradients(core, x, first, r):
    """y (T, B, D) as float32 and the gradients of sum(y r) at x and every trained weight."""
    x = x.detach().requires_grad_()
    y, _ = core(x, core.initial_state(x.shape[1], x.device), first)
    params = [p for p in core.parameters() if p.requires_grad]
    grads = torch.autograd.grad((y.float() * r[..., : y.shape[-1]]).sum(), [x, *params], allow_unused=True)
    return y.detach().float(), [torch.zeros_like(p) if g is None else g.float() for g, p in zip(grads, [x, *params])]


def assert_bf16_close(got, want, k: int) -> None:
    """Within bfloat16's error for k roundings, at the scale of the float32 values."""
    torch.testing.assert_close(got, want, **close_bf16(k, scale=float(want.abs().max())))


def assert_matches_float32(name, seed, steps, reset, cast):
    core, layers = build(name, seed)
    x, first, r = case(seed, steps, reset)
    y32, grads32 = outputs_and_gradients(core, x, first, r)
    if cast:
        core, x = copy.deepcopy(core).to(torch.bfloat16), x.to(torch.bfloat16)
        y16, grads16 = outputs_and_gradients(core, x, first, r)
    else:
        with AUTOCAST:
            y16, grads16 = outputs_and_gradients(core, x, first, r)
    k = roundings(steps, layers)
    assert y16.isfinite().all()
    assert_bf16_close(y16, y32, k)
    if name in SMOOTH:  # (see the module docstring)
        for got, want in zip(grads16, grads32):
            assert_bf16_close(got, want, 2 * k)


@pytest.mark.parametrize("name", CORES)
@settings(derandomize=True, max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**16), steps=st.integers(1, 8), reset=st.sampled_from([0.0, 0.3]))
def test_autocast_outputs_and_gradients_match_float32(name, seed, steps, reset):
    assert_matches_float32(name, seed, steps, reset, cast=False)


@pytest.mark.parametrize("name", CORES)
@settings(derandomize=True, max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**16), steps=st.integers(1, 8), reset=st.sampled_from([0.0, 0.3]))
def test_a_core_cast_to_bf16_matches_float32(name, seed, steps, reset):
    """Its state starts in the weights' dtype (initial_state), so every call is bfloat16 throughout;
    but the linear recurrences' state, which is complex, in float32 (the CPU has no complex bfloat16),
    and Mamba's (its state and its convolution's window, which the scan and the taps add into), too."""
    assert_matches_float32(name, seed, steps, reset, cast=True)
    core, _ = build(name, seed)
    core.to(torch.bfloat16)
    state_dtype = torch.float32 if CORES[name][0] in ("ffm", "lru", "mamba") else torch.bfloat16
    assert all(value.dtype in (state_dtype, torch.bool) for value in core.initial_state(BATCH, "cpu") if isinstance(value, torch.Tensor))


@pytest.mark.parametrize("name", [name for name in SMOOTH if CORES[name][0] == "feedback"])
@settings(derandomize=True, max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**16), steps=st.integers(1, 8), reset=st.sampled_from([0.0, 0.3]), dropout=st.sampled_from([0.0, 0.3]))
def test_the_feedback_backward_under_autocast_matches_its_reference(name, seed, steps, reset, dropout):
    """The hand-written backward (float32 accumulators, norms in float32) against plain autograd
    through the reference model, both under autocast, dropout included (the same masks)."""
    x, first, r = case(seed, steps, reset)
    core, layers = build(name, seed, dropout=dropout)
    results = []
    for model in (core, reference_of(core)):
        torch.manual_seed(seed)  # the same dropout masks
        with AUTOCAST:
            results.append(outputs_and_gradients(model.train(), x, first, r))
    (y, grads), (y_ref, grads_ref) = results
    k = roundings(steps, layers)
    assert_bf16_close(y, y_ref, k)
    for got, want in zip(grads, grads_ref):
        assert_bf16_close(got, want, 2 * k)


@pytest.mark.parametrize("name", CORES)
def test_acting_a_step_a_call_under_autocast_matches_one_float32_call(name):
    """T calls of one step without gradients (the attention cores' stored keys and in-place
    extension, in bfloat16 after the first call) against one float32 call."""
    core, layers = build(name, 0)
    x, first, _ = case(1, 6, 0.3)
    with torch.no_grad():
        want, _ = core(x, core.initial_state(BATCH, "cpu"), first)
        state, got = core.initial_state(BATCH, "cpu"), []
        with AUTOCAST:
            for t in range(x.shape[0]):
                y, state = core(x[t : t + 1], state, first[t : t + 1])
                got.append(y.float())
    assert_bf16_close(torch.cat(got), want, roundings(x.shape[0], layers))


@pytest.mark.parametrize("name", OPENS)
def test_a_run_fed_a_step_at_a_time_under_autocast_matches_float32(name):
    """Policy.open's path (acting with the graph kept): the outputs and the gradients."""
    core, layers = build(name, 2)
    x, first, r = case(3, 6, 0.3)

    def run_open():
        params = [p for p in core.parameters() if p.requires_grad]
        run = core.open(core.initial_state(BATCH, "cpu"), x.shape[0])
        inputs = x.clone().requires_grad_()
        for t in range(x.shape[0]):
            run.step(inputs[t], first[t])
        y = run.outputs().float()
        grads = torch.autograd.grad((y * r[..., : y.shape[-1]]).sum(), [inputs, *params])
        return y.detach(), grads

    y32, grads32 = run_open()
    with AUTOCAST:
        y16, grads16 = run_open()
    k = roundings(x.shape[0], layers)
    assert_bf16_close(y16, y32, k)
    for got, want in zip(grads16, grads32):
        assert got.dtype == want.dtype == torch.float32  # the weights' gradients accumulate in float32
        assert_bf16_close(got, want, 2 * k)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_a_masked_score_stays_finite_with_a_real_score_added(dtype):
    """The Feedback core adds its mask to the scores as a bias: the sum must not reach -inf,
    whose all-masked rows (an episode's first step) softmax to NaN."""
    largest_score = torch.finfo(dtype).max / 4  # far beyond any real score
    score = torch.tensor(masked_score(dtype), dtype=dtype) - torch.tensor(largest_score, dtype=dtype)
    assert score.isfinite() and torch.softmax(score.repeat(3), 0).isfinite().all()


@pytest.mark.parametrize("name", ["feedback", "transformer"])
def test_an_episodes_first_step_is_finite_in_float16(name):
    core, _ = build(name, 0)
    core.to(torch.float16)
    x = torch.randn(3, BATCH, INPUT_DIM, dtype=torch.float16)
    y, _ = core(x, core.initial_state(BATCH, "cpu"), torch.ones(3, BATCH, dtype=torch.bool))
    assert y.isfinite().all()


@pytest.mark.parametrize("steps", [1, 6])
def test_without_a_bf16_kernel_the_fused_pass_runs_in_float32_says_so_once_and_matches(steps, monkeypatch, capsys):
    """A CPU without oneDNN's bfloat16 LSTM (agents/cores/cpu_kernels.py), played here on any CPU
    by making the probe fail: the LSTM's fused pass runs in float32, hands back bfloat16 as the
    kernel would, says so once per process, and its outputs and gradients match float32 within
    bfloat16's tolerance. (tests/cores/test_any_cpu.py runs this file where the kernel really is missing.)"""
    monkeypatch.setattr(cpu_kernels, "_cpu_has_bf16_lstm", lambda: False)
    cpu_kernels._say_once.cache_clear()
    try:
        assert_matches_float32("lstm", 0, steps, 0.3, cast=False)
        assert_matches_float32("lstm", 1, steps, 0.0, cast=False)
        core, _ = build("lstm", 0)
        x, first, _ = case(0, steps, 0.0)
        with AUTOCAST:
            y, state = core(x, core.initial_state(BATCH, "cpu"), first)
        assert y.dtype == state.h.dtype == state.c.dtype == (torch.bfloat16 if steps > 1 else torch.float32)  # (the cell's is float32)
    finally:
        cpu_kernels._say_once.cache_clear()
    notices = capsys.readouterr().err.count(cpu_kernels.NOTICE)
    assert notices == (1 if steps > 1 else 0)  # a call of one step runs torch.lstm_cell, which every CPU has
