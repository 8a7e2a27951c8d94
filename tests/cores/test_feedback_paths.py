"""The Feedback core's fast paths against the reference model (feedback/reference.py): the
Python fused step (steps outside autograd, backward by hand: feedback/step.py) and the compiled
one (C++: feedback/compiled.py). Outputs, the carried state and every gradient (the inputs' and
each parameter's) agree for every variant, the gated carry (carry="gate"), the tanh write
(memory_write="tanh") and the kept slot (keep_slot=True), alone and together, on both paths included, with memory carried in from earlier calls, episode starts anywhere, calls cut into
chunks and dropout; and the step code traces whole under torch.compile."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.cores.feedback import compiled as feedback_compiled
from agents.cores.feedback import core as feedback_core

from agents.cores import make_core, run_options
from agents.cores.feedback.reference import reference_of
from agents.cores.feedback.step import layer_backward, layer_forward
from tests.float32 import close32

INPUT_DIM = 5


@pytest.fixture(params=["compiled", "python"])
def path(request):
    """Each fast path in turn; the compiled one must have been built (the test machines have a compiler)."""
    if request.param == "compiled":
        assert feedback_compiled.extension() is not None, "the compiled Feedback step did not build"
    return request.param


def step_of(path: str, options: dict) -> str:
    """The core's `step` on `path`: on the compiled one "compiled" (refused, never fallen back
    from, where it cannot run), but "auto" with persistent vectors, which only the Python step runs."""
    if path == "python":
        return "python"
    return "auto" if options["persistent"] else "compiled"


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
        "read_norm": draw(st.booleans()),
        "dropout": draw(st.sampled_from([0.0, 0.0, 0.3])),
        "value_init": draw(st.sampled_from(["pytorch", "orthogonal"])),
        "carry": draw(st.sampled_from(["none", "none", "gate"])),  # the gated carry (reference.py)
        "memory_write": draw(st.sampled_from(["raw", "raw", "tanh"])),  # the tanh write (reference.py)
        "keep_slot": draw(st.sampled_from([False, False, True])),  # the kept slot (reference.py)
    }


def build(options: dict, seed: int, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """A core in train mode (dropout on where configured) with weights off their initial values."""
    torch.manual_seed(seed)
    core = make_core("feedback", INPUT_DIM, **options).to(dtype).train()
    with torch.no_grad():
        for p in core.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return core


def calls(core, x0, x, first, cuts, seed):
    """A carried call without gradients (x0), then x in chunks cut at `cuts`, with gradients ->
    y (T, B, D), the state after, the gradients of sum(y r) at x and every parameter (by name)."""
    batch = x.shape[1]
    torch.manual_seed(seed)  # the same dropout masks for every path
    with torch.no_grad():
        _, state = core(x0, core.initial_state(batch, "cpu"), torch.zeros(x0.shape[:2], dtype=torch.bool))
    x = x.detach().requires_grad_()
    outputs = []
    for a, b in zip([0, *cuts], [*cuts, x.shape[0]]):
        y, state = core(x[a:b], state, first[a:b])
        outputs.append(y)
    y = torch.cat(outputs)
    names, params = zip(*core.named_parameters())
    r = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed), dtype=y.dtype)
    grads = torch.autograd.grad((y * r).sum(), [x, *params], allow_unused=True)
    grads = {name: torch.zeros_like(p) if g is None else g for name, g, p in zip(["x", *names], grads, [x, *params])}
    return y.detach(), state, grads


def window(state, span: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A state's last `span` memory vectors (B, S, D) and their validity (B, S), whichever model made it."""
    end = getattr(state, "end", span)
    return state.memory[:, end - span : end], state.valid


def assert_equal_to_the_reference(options, seed, steps, batch, reset, carried, cuts, dtype, tolerance):
    core = build(options, seed, dtype)
    reference = reference_of(core)
    generator = torch.Generator().manual_seed(seed + 1)
    x0 = torch.randn(carried, batch, INPUT_DIM, generator=generator, dtype=dtype)
    x = torch.randn(steps, batch, INPUT_DIM, generator=generator, dtype=dtype)
    first = torch.rand(steps, batch, generator=generator) < reset
    y, state, grads = calls(core, x0, x, first, cuts, seed)
    y_ref, state_ref, grads_ref = calls(reference, x0, x, first, cuts, seed)
    torch.testing.assert_close(y, y_ref, **tolerance)
    for name in grads_ref:
        torch.testing.assert_close(grads[name], grads_ref[name], **tolerance, msg=name)
    (memory, valid), (memory_ref, valid_ref) = window(state, options["span"]), window(state_ref, options["span"])
    torch.testing.assert_close(memory, memory_ref, **tolerance)
    assert torch.equal(valid, valid_ref)
    torch.testing.assert_close(state.kept, state_ref.kept, **tolerance)


@settings(derandomize=True, max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the path stays)
@given(options=configurations(), seed=st.integers(0, 2**16), steps=st.integers(1, 9), batch=st.integers(1, 3),
       reset=st.sampled_from([0.0, 0.2, 0.5]), carried=st.integers(1, 8), data=st.data())
def test_each_fast_path_equals_the_reference_in_float64(path, options, seed, steps, batch, reset, carried, data):
    """To 1e-10: outputs, state and every gradient, with memory carried in from an earlier call
    (its keys recomputed with gradients), resets anywhere, chunked calls, dropout, the carry,
    persistent vectors (the compiled path's fallback), shared or per-layer key/value
    projections, pre- or post-norm."""
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, steps - 1)), max_size=3))) - {steps})
    options = {**options, "step": step_of(path, options)}
    assert_equal_to_the_reference(options, seed, steps, batch, reset, carried, cuts, torch.float64, dict(atol=1e-10, rtol=1e-10))


@settings(derandomize=True, max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the path stays)
@given(options=configurations(), seed=st.integers(0, 2**16), steps=st.integers(2, 9), batch=st.integers(1, 3),
       reset=st.sampled_from([0.0, 0.2]), carried=st.integers(1, 8), data=st.data())
def test_the_tanh_write_on_each_fast_path_equals_the_reference_in_float64(path, options, seed, steps, batch, reset, carried, data):
    """The same with the tanh write always on (the draws above may not reach it): its forward and
    the 1 - tanh^2 of its backward, alone and with the carry, on both paths."""
    cuts = sorted(set(data.draw(st.lists(st.integers(1, steps - 1), max_size=2))) - {steps})
    options = {**options, "memory_write": "tanh", "step": step_of(path, options)}
    assert_equal_to_the_reference(options, seed, steps, batch, reset, carried, cuts, torch.float64, dict(atol=1e-10, rtol=1e-10))


@settings(derandomize=True, max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the path stays)
@given(options=configurations(), seed=st.integers(0, 2**16), steps=st.integers(2, 9), batch=st.integers(1, 3),
       reset=st.sampled_from([0.0, 0.2, 0.5]), carried=st.integers(1, 8), data=st.data())
def test_the_kept_slot_on_each_fast_path_equals_the_reference_in_float64(path, options, seed, steps, batch, reset, carried, data):
    """The same with the kept slot always on (the draws above may not reach it): its read after
    the window, its blend, and its gradient carried back through reads and blends across chunked
    calls and episode starts, with every other variant drawn beside it, on both paths."""
    cuts = sorted(set(data.draw(st.lists(st.integers(1, steps - 1), max_size=2))) - {steps})
    options = {**options, "keep_slot": True, "step": step_of(path, options)}
    assert_equal_to_the_reference(options, seed, steps, batch, reset, carried, cuts, torch.float64, dict(atol=1e-10, rtol=1e-10))


@settings(derandomize=True, max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # (the path stays)
@given(options=configurations(), seed=st.integers(0, 2**16), steps=st.integers(1, 9), batch=st.integers(1, 3),
       reset=st.sampled_from([0.0, 0.2, 0.5]), carried=st.integers(1, 8), data=st.data())
def test_each_fast_path_equals_the_reference_in_float32(path, options, seed, steps, batch, reset, carried, data):
    """The same in float32 (the compiled path's dtype), to float32's rounding over the terms a
    gradient sums: every step of the call and the carried one, through every layer."""
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, steps - 1)), max_size=3))) - {steps})
    terms = (steps + carried) * options["n_layers"] * (options["span"] + 4)
    options = {**options, "step": step_of(path, options)}
    assert_equal_to_the_reference(options, seed, steps, batch, reset, carried, cuts, torch.float32, close32(terms))


@settings(derandomize=True, max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(options=configurations(), seed=st.integers(0, 2**16), steps=st.integers(1, 9), batch=st.integers(1, 3),
       reset=st.sampled_from([0.0, 0.2, 0.5]), carried=st.integers(1, 8), data=st.data())
def test_the_compiled_path_reading_its_windows_from_blocks_equals_the_reference(monkeypatch, options, seed, steps, batch, reset, carried, data):
    """Long recording calls read their windows from blocks of 2 S slots and sum their gradients
    from them (feedback/core.py: BLOCKED_FROM); made to here, every recording call does, and it
    still equals the reference to 1e-10, chunked calls (whose blocks carry over between chunks),
    the slots carried in and the gated carry included."""
    monkeypatch.setattr(feedback_core, "BLOCKED_FROM", 0)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, steps - 1)), max_size=3))) - {steps})
    options = {**options, "persistent": 0, "step": "compiled"}
    assert_equal_to_the_reference(options, seed, steps, batch, reset, carried, cuts, torch.float64, dict(atol=1e-10, rtol=1e-10))


def test_recording_calls_read_from_blocks_where_their_buffers_are_long():
    """Blocks where the buffers hold at least BLOCKED_FROM slots and four windows, and only
    while recording: not at the CPU preset's rollout (span 64, 32 steps: 128 slots)."""
    core = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, span=64)
    state = core.initial_state(2, "cpu")
    assert not core.open(state, 32).blocked
    assert core.open(state, feedback_core.BLOCKED_FROM).blocked
    with torch.no_grad():
        assert not core.open(state, feedback_core.BLOCKED_FROM).blocked
    wide = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, span=128)
    assert not wide.open(wide.initial_state(2, "cpu"), 256).blocked  # 384 slots, under 4 x 128


@pytest.mark.parametrize("options", [dict(), dict(pre_norm=False, shared_kv=False, dropout=0.3)])
def test_calls_take_the_path_their_step_says(monkeypatch, options):
    """step "auto" (the default) runs compiled on the CPU in float32 for the default variant and
    post-norm, per-layer projections, dropout, the carry, the kept slot; persistent vectors and
    bfloat16 take the Python step, and so does everything under step "python"."""
    monkeypatch.delenv(feedback_compiled.SWITCH, raising=False)
    core = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, **options).train()
    state = core.initial_state(2, "cpu")
    assert core.open(state, 1).compiled
    assert not make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, persistent=2, **options).open(state, 1).compiled
    keeping = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, keep_slot=True, **options)
    assert keeping.open(keeping.initial_state(2, "cpu"), 1).compiled
    assert make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, carry="gate", **options).open(state, 1).compiled
    assert not core.to(torch.bfloat16).open(core.initial_state(2, "cpu"), 1).compiled
    assert core.float().open(state, 1).compiled  # each device and dtype chose once: float32 still compiled
    assert not make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, step="python", **options).open(state, 1).compiled
    assert make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, step="compiled", **options).open(state, 1).compiled


def test_the_switch_is_read_when_a_core_is_built(monkeypatch):
    """FEEDBACK_RL_COMPILED=0 keeps a core built under it on the Python step ("auto"); set after a
    core is built, it changes nothing of that core's; a value other than 0 or 1 is refused."""
    monkeypatch.setenv(feedback_compiled.SWITCH, "0")
    off = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2)
    monkeypatch.setenv(feedback_compiled.SWITCH, "1")
    on = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2)
    monkeypatch.setenv(feedback_compiled.SWITCH, "0")
    state = on.initial_state(2, "cpu")
    assert on.open(state, 1).compiled and not off.open(state, 1).compiled
    monkeypatch.setenv(feedback_compiled.SWITCH, "yes")
    with pytest.raises(ValueError, match="FEEDBACK_RL_COMPILED must be 0 or 1, got 'yes'"):
        make_core("feedback", INPUT_DIM, d_model=8, n_heads=2)


def test_step_compiled_where_it_cannot_run_is_refused_saying_why(monkeypatch):
    """When the core is built (persistent vectors, the carry beside them, the switch at 0), at a
    call (another dtype or device), and when a run resolves its step (run_options, as the
    command lines do)."""
    monkeypatch.delenv(feedback_compiled.SWITCH, raising=False)
    refused = r"step 'compiled' cannot run here: "
    with pytest.raises(ValueError, match=refused + r"persistent vectors \(persistent=2\) run on the Python step only; use step=python"):
        make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, persistent=2, step="compiled")
    with pytest.raises(ValueError, match=refused + r"persistent vectors \(persistent=2\) run on the Python step only"):
        run_options("feedback", {"step": "compiled", "persistent": 2, "carry": "gate"}, torch.device("cpu"), torch.float32)
    core = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, step="compiled").to(torch.bfloat16)
    with pytest.raises(ValueError, match=refused + "it computes in float32 or float64 with weights of that dtype, not in bfloat16"):
        core.open(core.initial_state(2, "cpu"), 1)
    with pytest.raises(ValueError, match=refused + "it runs on the CPU, and this is on cuda"):
        run_options("feedback", {"step": "compiled"}, torch.device("cuda"), torch.float32)
    with pytest.raises(ValueError, match=r"step must be one of \['auto', 'compiled', 'python'\], got 'compild'"):
        make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, step="compild")
    monkeypatch.setenv(feedback_compiled.SWITCH, "0")
    with pytest.raises(ValueError, match=refused + "FEEDBACK_RL_COMPILED=0 in the environment keeps the Python step"):
        make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, step="compiled")


@pytest.mark.parametrize("device, dtype, chosen", [("cpu", torch.float32, "compiled"), ("cpu", torch.bfloat16, "python"),
                                                    ("cuda", torch.float32, "python")])
def test_a_run_resolves_auto_to_the_path_it_takes(monkeypatch, device, dtype, chosen):
    """run_options makes "auto" concrete for the run's device and compute dtype, so its config says
    which path ran (the carry's and the kept slot's as the paper's model's; persistent vectors' the Python step's);
    cores without run choices pass theirs through."""
    monkeypatch.delenv(feedback_compiled.SWITCH, raising=False)
    assert run_options("feedback", {"span": 3}, torch.device(device), dtype) == {"span": 3, "step": chosen}
    assert run_options("feedback", {"step": "python"}, torch.device(device), dtype) == {"step": "python"}
    assert run_options("feedback", {"carry": "gate"}, torch.device(device), dtype) == {"carry": "gate", "step": chosen}
    assert run_options("feedback", {"persistent": 2}, torch.device(device), dtype) == {"persistent": 2, "step": "python"}
    assert run_options("feedback", {"keep_slot": True}, torch.device(device), dtype) == {"keep_slot": True, "step": chosen}
    assert run_options("transformer", {"span": 8}, torch.device(device), dtype) == {"span": 8}


def assert_gradcheck(core, first: torch.Tensor, names: list[str]) -> None:
    """torch.autograd.gradcheck (finite differences, float64, fast mode: random projections of the
    Jacobian) of one call of `core` over the steps of `first` (T, 2), from a state three steps
    in, with respect to its inputs and the parameters `names`."""
    with torch.no_grad():
        _, state = core(torch.randn(3, 2, INPUT_DIM, dtype=torch.float64), core.initial_state(2, "cpu"), torch.zeros(3, 2, dtype=torch.bool))
    params = dict(core.named_parameters())
    leaves = [params[n].detach().clone().requires_grad_(True) for n in names]
    x = torch.randn(first.shape[0], 2, INPUT_DIM, dtype=torch.float64, requires_grad=True)

    def call(x, *weights):
        return torch.func.functional_call(core, dict(zip(names, weights)), (x, state, first))[0]

    assert torch.autograd.gradcheck(call, (x, *leaves), fast_mode=True)


def test_gradcheck_through_the_hand_written_backward():
    """The fused call's inputs and weights of every kind: a query projection, the shared
    key/value projection and its norm, a feed-forward layer, the position table, the layer mix."""
    core = build(dict(d_model=4, n_heads=2, n_layers=2, span=3), 0).eval()
    first = torch.tensor([[True, False], [False, False], [False, True], [False, False]])
    assert_gradcheck(core, first, ["blocks.0.query.weight", "kv.0.weight", "memory_norm.0.weight", "blocks.1.ff.fc1.weight",
                                   "blocks.1.position", "layer_logits"])


@pytest.mark.parametrize("write", ["raw", "tanh"])
@pytest.mark.parametrize("step", ["compiled", "python"])
def test_gradcheck_through_the_carry(step, write):
    """The same through the carry's backward on each path (its gates an input of the fused call,
    m_t reaching m_{t+1} through them), with the paper's write and the tanh one: the gate's
    weights, the embedding's, a key/value projection's, with episode starts cutting the carry mid-call."""
    core = build(dict(d_model=4, n_heads=2, n_layers=2, span=3, carry="gate", memory_write=write, step=step), 0).eval()
    first = torch.tensor([[True, False], [False, False], [False, True], [False, False], [False, False]])
    assert_gradcheck(core, first, ["carry_gate.weight", "carry_gate.bias", "embed.weight", "kv.0.weight", "layer_logits"])


@pytest.mark.parametrize("step", ["compiled", "python"])
def test_gradcheck_through_the_kept_slot(step):
    """The same through the kept slot's backward on each path (its gates an input of the fused
    call, k_t reaching step t + 1's read and k_{t+1} through them), beside the carry: the kept
    gate's weights, the position table (whose row 0 only the kept slot reads), the embedding's, a
    key/value projection's and its norm's, with episode starts cutting the kept slot mid-call."""
    core = build(dict(d_model=4, n_heads=2, n_layers=2, span=2, keep_slot=True, carry="gate", step=step), 0).eval()
    first = torch.tensor([[True, False], [False, False], [False, True], [False, False], [False, False], [False, False]])
    assert_gradcheck(core, first, ["kept_gate.weight", "kept_gate.bias", "blocks.0.position", "embed.weight", "kv.0.weight",
                                   "memory_norm.0.weight"])


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("persistent", [0, 2])
def test_step_code_compiles_with_no_graph_break(pre_norm, persistent):
    """layer_forward and layer_backward trace whole under torch.compile(fullgraph=True) (no host
    synchronisation, no data-dependent Python control flow) and compute the same as eagerly.
    The eager backend checks the tracing without paying for code generation."""
    options = dict(d_model=8, n_heads=2, n_layers=1, span=4, pre_norm=pre_norm, persistent=persistent, dropout=0.2)
    core = build(options, 0)
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


@settings(derandomize=True, max_examples=10, deadline=None)
@given(options=configurations(), seed=st.integers(0, 2**16), steps=st.integers(9, 40), span=st.integers(7, 20), batch=st.integers(1, 3),
       reset=st.sampled_from([0.0, 0.1]), carried=st.integers(1, 24), blocked=st.booleans())
def test_the_compiled_path_with_longer_spans_and_calls_equals_the_reference(options, seed, steps, span, batch, reset, carried, blocked):
    """The other tests draw spans of 1 to 6 and calls of up to 9 steps; here spans of 7 to 20 and
    calls of 9 to 40 steps (several spans long, so that slots are read by steps far apart and,
    read from blocks, windows cross block boundaries), from the buffers or from blocks of slots:
    equal to the reference to 1e-10."""
    options = {**options, "span": span, "persistent": 0, "step": "compiled"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(feedback_core, "BLOCKED_FROM", 0 if blocked else 10**9)
        assert_equal_to_the_reference(options, seed, steps, batch, reset, carried, [], torch.float64, dict(atol=1e-10, rtol=1e-10))
