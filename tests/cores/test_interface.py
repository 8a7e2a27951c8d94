"""The invariants every core holds, under configurations drawn by hypothesis:
chunking, episode isolation, batch independence, gradients and detached state; plus the
Transformer against a naive step-by-step reference (the Feedback core's against its reference
model: test_feedback_paths.py)."""


import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agents.cores import CORES, core_options, make_core
from agents.cores.state import select_envs, state_from_plain, state_to_plain

from benchmarks.naive_cores import NaiveTransformer

INPUT_DIM = 5
ATOL = 1e-5
# GTrXL's gates keep the stream near unit size (g lies between x and tanh(...)): after three layers
# its spread is about a third of the residual stream's, and the LayerNorms that read it scale its
# roundings up as much. Over 40 drawn 3-layer cores (d 18) a gated core's float32 outputs missed
# float64 by up to 1.2e-5, an ungated one's by 3.4e-6.
GATED_ATOL = 4e-5


# The Feedback core's ways of keeping the cue (reference.py): the carry alone on FeedbackCore (either step), the others on the reference model
KEEPING = [{}, {}, {"carry": "gate"}, {"keep_slot": True}, {"memory_write": "tanh", "read_norm": False},
           {"carry": "gate", "keep_slot": True, "memory_write": "tanh", "keep_t_max": 8}]


@st.composite
def attention_options(draw, feedback):
    heads = draw(st.integers(1, 3))
    options = {
        "n_heads": heads,
        "d_model": heads * draw(st.sampled_from([4, 6])),  # (LayerNorm over 2 values is degenerate)
        "n_layers": draw(st.integers(1, 3)),
        "span": draw(st.integers(1, 6)),
        "pre_norm": draw(st.booleans()),
        "persistent": draw(st.sampled_from([0, 0, 2])),
    }
    if feedback:
        options["shared_kv"] = draw(st.booleans())
        options.update(draw(st.sampled_from(KEEPING)))  # the paper's model (its fast paths) or a way of keeping the cue
    elif draw(st.booleans()):  # GTrXL's gates (pre-norm only; the Feedback core refuses them)
        options.update(gating="gru", pre_norm=True, gate_bias=draw(st.sampled_from([2.0, 0.5])))
    return options


@st.composite
def reservoir_options(draw):
    kind = draw(st.sampled_from(["ffn", "transformer", "esn"]))
    if kind == "esn":
        return {"kind": kind, "units": draw(st.integers(4, 12)), "d_model": 8, "leak_rate": draw(st.sampled_from([0.3, 1.0]))}
    options = draw(attention_options(feedback=False))
    options.update(kind=kind, n_reservoir=draw(st.integers(1, options["n_layers"])), backskip=draw(st.booleans()))
    return options


OPTIONS = {
    "feedback": attention_options(feedback=True),
    "transformer": attention_options(feedback=False),
    "lstm": st.fixed_dictionaries({"hidden_size": st.integers(2, 8), "n_layers": st.integers(1, 2)}),
    "gru": st.fixed_dictionaries({"hidden_size": st.integers(2, 8), "n_layers": st.integers(1, 2)}),
    "reservoir": reservoir_options(),
    "mlp": st.fixed_dictionaries({"hidden_size": st.integers(2, 8), "n_layers": st.integers(1, 2)}),
    "ffm": st.fixed_dictionaries({"d_model": st.integers(2, 8), "memory_size": st.integers(1, 6), "context_size": st.integers(1, 3),
                                  "max_period": st.integers(1, 64)}),
    "lru": st.fixed_dictionaries({"d_model": st.integers(2, 8), "state_size": st.integers(1, 8), "n_layers": st.integers(1, 2)}),
    "mamba": st.fixed_dictionaries({"d_model": st.integers(2, 8), "d_state": st.integers(1, 4), "d_conv": st.integers(1, 4),
                                    "expand": st.integers(1, 2), "n_layers": st.integers(1, 2)}),
}


@st.composite
def cases(draw, name):
    """A core (in eval mode, with non-trivial weights), inputs x (T, B, I) and first (T, B)."""
    options = draw(OPTIONS[name])
    torch.manual_seed(draw(st.integers(0, 2**16)))
    core = make_core(name, INPUT_DIM, **options).eval()
    with torch.no_grad():  # move every trainable weight off its initial value (zeros, ones)
        for p in core.parameters():
            if p.requires_grad:
                p.add_(0.3 * torch.randn_like(p))
    steps, batch = draw(st.integers(1, 12)), draw(st.integers(1, 3))
    x = torch.randn(steps, batch, INPUT_DIM)
    first = torch.rand(steps, batch) < draw(st.sampled_from([0.0, 0.15, 0.4]))
    return core, x, first


def tolerance(core) -> float:
    """The absolute tolerance on a core's float32 outputs (GATED_ATOL with GTrXL's gates)."""
    return GATED_ATOL if getattr(core.config, "gating", "none") != "none" else ATOL


def run(core, x, first, state=None):
    state = core.initial_state(x.shape[1], x.device) if state is None else state
    return core(x, state, first)


def run_chunked(core, x, first, cuts):
    state, outputs = core.initial_state(x.shape[1], x.device), []
    for a, b in zip([0, *cuts], [*cuts, x.shape[0]]):
        y, state = core(x[a:b], state, first[a:b])
        outputs.append(y)
    return torch.cat(outputs), state


def tensors(state):
    return [value for value in state if isinstance(value, torch.Tensor)]


def test_every_core_is_registered():
    assert set(CORES) == set(OPTIONS) == {"feedback", "transformer", "lstm", "gru", "reservoir", "mlp", "ffm", "lru", "mamba"}


@pytest.mark.parametrize("name", sorted(OPTIONS))
@settings(derandomize=True, max_examples=20, deadline=None)
@given(data=st.data())
def test_chunking_equals_one_call(name, data):
    core, x, first = data.draw(cases(name))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, x.shape[0] - 1)), max_size=4))) - {x.shape[0]})
    whole, whole_state = run(core, x, first)
    chunked, chunked_state = run_chunked(core, x, first, cuts)
    assert whole.shape == (*x.shape[:2], core.output_dim)
    torch.testing.assert_close(chunked, whole, atol=tolerance(core), rtol=0)
    # the states are equivalent: the same continuation follows from both
    more, more_first = torch.randn(3, x.shape[1], INPUT_DIM), torch.rand(3, x.shape[1]) < 0.3
    torch.testing.assert_close(core(more, chunked_state, more_first)[0], core(more, whole_state, more_first)[0], atol=tolerance(core), rtol=0)
    with torch.no_grad():  # acting: single steps without gradients, the cores' fast path
        stepped, _ = run_chunked(core, x, first, list(range(1, x.shape[0])))
    torch.testing.assert_close(stepped, whole.detach(), atol=tolerance(core), rtol=0)


@pytest.mark.parametrize("name", sorted(OPTIONS))
@settings(derandomize=True, max_examples=20, deadline=None)
@given(data=st.data())
def test_episode_isolation(name, data):
    """Inputs before a `first` change nothing at or after it, within a call and across calls."""
    core, x, first = data.draw(cases(name))
    steps, batch = first.shape
    start = data.draw(st.integers(0, steps - 1))
    env = data.draw(st.integers(0, batch - 1))
    first[start, env] = True
    changed = x.clone()
    changed[:start, env] += 5.0 * torch.randn(start, INPUT_DIM)
    y, _ = run(core, x, first)
    y_changed, _ = run(core, changed, first)
    torch.testing.assert_close(y_changed[start:, env], y[start:, env], atol=tolerance(core), rtol=0)
    if start > 0:  # the same with the episode boundary at a chunk boundary
        _, state = run(core, changed[:start], first[:start])
        y_after, _ = run(core, x[start:], first[start:], state)
        torch.testing.assert_close(y_after[:, env], y[start:, env], atol=tolerance(core), rtol=0)


@pytest.mark.parametrize("name", sorted(OPTIONS))
@settings(derandomize=True, max_examples=20, deadline=None)
@given(data=st.data())
def test_batch_independence(name, data):
    core, x, first = data.draw(cases(name))
    if x.shape[1] < 2:
        x, first = x.repeat(1, 2, 1), first.repeat(1, 2)
    changed = x.clone()
    changed[:, 0] += 5.0 * torch.randn(x.shape[0], INPUT_DIM)
    y, _ = run(core, x, first)
    y_changed, _ = run(core, changed, first)
    torch.testing.assert_close(y_changed[:, 1:], y[:, 1:], atol=tolerance(core), rtol=0)


@pytest.mark.parametrize("name", sorted(OPTIONS))
@settings(derandomize=True, max_examples=15, deadline=None)
@given(data=st.data())
def test_gradients_reach_every_trainable_parameter_and_state_is_detached(name, data):
    core, _, _ = data.draw(cases(name))
    # one visible key would make every attention score's gradient zero
    assume(getattr(core.config, "span", 2) >= 2)
    steps, batch = 5, 2
    x = torch.randn(steps, batch, INPUT_DIM)
    first = torch.zeros(steps, batch, dtype=torch.bool)
    first[0] = True
    state = core.initial_state(batch, "cpu")
    _, state = core(x, state, first)  # a carried state, so memory of a past call is in play
    y, state = core(x, state, torch.zeros_like(first))
    (y[-1] * torch.randn_like(y[-1])).sum().backward()
    for param_name, p in core.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient reaches {param_name}"
        else:
            assert p.grad is None, f"frozen {param_name} got a gradient"
    assert all(not t.requires_grad for t in tensors(state))


@pytest.mark.parametrize("name", sorted(OPTIONS))
@settings(derandomize=True, max_examples=10, deadline=None)
@given(data=st.data())
def test_state_is_batch_major_so_envs_can_be_selected(name, data):
    """Selecting envs from a state and going on equals going on with all and selecting."""
    core, x, first = data.draw(cases(name))
    x, first = x.repeat(1, 3, 1), first.repeat(1, 3)  # B >= 3
    _, state = run(core, x, first)
    more = torch.randn(2, x.shape[1], INPUT_DIM)
    more_first = torch.zeros(2, x.shape[1], dtype=torch.bool)
    index = torch.tensor([2, 0])
    with torch.no_grad():
        y_all, _ = core(more, state, more_first)
        y_some, _ = core(more[:, index], select_envs(state, index), more_first[:, index])
    torch.testing.assert_close(y_some, y_all[:, index], atol=tolerance(core), rtol=0)


@settings(derandomize=True, max_examples=25, deadline=None)
@given(data=st.data())
def test_the_transformer_matches_the_naive_reference(data):
    """Outputs, and the gradients of a loss over them, equal the naive reference's."""
    core, x, first = data.draw(cases("transformer"))
    reference = NaiveTransformer(core)
    expected, _ = reference(x, reference.initial_state(x.shape[1], "cpu"), first)
    y, _ = run(core, x, first)
    torch.testing.assert_close(y, expected, atol=tolerance(core), rtol=0)
    weights = torch.randn_like(y)
    params = [p for p in core.parameters() if p.requires_grad]
    grads = torch.autograd.grad((y * weights).sum(), params, allow_unused=True)
    expected_grads = torch.autograd.grad((expected * weights).sum(), params, allow_unused=True)
    for p, g, e in zip(params, grads, expected_grads):
        torch.testing.assert_close(g if g is not None else torch.zeros_like(p), e if e is not None else torch.zeros_like(p), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["feedback", "transformer"])
def test_two_continuations_of_one_state_do_not_disturb_each_other(name):
    """Acting extends a state's buffers in place; a second call from the same state must not
    see (or overwrite) what the first wrote."""
    torch.manual_seed(0)
    core = make_core(name, INPUT_DIM, d_model=8, n_heads=2, span=3).eval()
    x, first = torch.randn(9, 2, INPUT_DIM), torch.zeros(9, 2, dtype=torch.bool)
    with torch.no_grad():
        _, state = run(core, x[:4], first[:4])
        a1, a_state = core(x[4:6], state, first[4:6])
        b1, _ = core(x[6:8], state, first[6:8])  # a different branch from the same state
        a2, _ = core(x[8:], a_state, first[8:])  # and the first branch goes on
        expected_b, _ = core(x[6:8], run(core, x[:4], first[:4])[1], first[6:8])
        expected_a2, _ = core(x[8:], run(core, torch.cat([x[:4], x[4:6]]), first[:6])[1], first[8:])
    torch.testing.assert_close(b1, expected_b, atol=ATOL, rtol=0)
    torch.testing.assert_close(a2, expected_a2, atol=ATOL, rtol=0)


def test_empty_memory_gives_finite_outputs():
    for name in ("feedback", "transformer"):
        core = make_core(name, INPUT_DIM, span=3)
        y, _ = run(core, torch.randn(4, 3, INPUT_DIM), torch.ones(4, 3, dtype=torch.bool))
        assert torch.isfinite(y).all()


def test_feedback_state_does_not_grow_with_layers():
    sizes = []
    for layers in (1, 4):
        core = make_core("feedback", INPUT_DIM, n_layers=layers, d_model=8, n_heads=2, span=10)
        sizes.append(sum(t.numel() for t in tensors(core.initial_state(3, "cpu"))))
    assert sizes[0] == sizes[1]


def test_feedback_exposes_its_layer_weights():
    core = make_core("feedback", INPUT_DIM, n_layers=3)
    weights = core.layer_weights
    assert weights.shape == (4,) and torch.isclose(weights.sum(), torch.tensor(1.0))


def test_make_core_rejects_unknown_names_and_options():
    with pytest.raises(ValueError, match=r"unknown core 'rnn'; choose from \['feedback', 'ffm', 'gru', 'lru', 'lstm', 'mamba', 'mlp', 'reservoir', 'transformer'\]"):
        make_core("rnn", INPUT_DIM)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['heads'\] for core 'feedback'; it takes \[.*'n_heads'"):
        make_core("feedback", INPUT_DIM, heads=4)
    with pytest.raises(ValueError, match=r"d_model \(10\) must be divisible by n_heads \(4\)"):
        make_core("transformer", INPUT_DIM, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="span must be an integer >= 1, got 0"):
        make_core("feedback", INPUT_DIM, span=0)
    with pytest.raises(ValueError, match="dropout must be a number in"):
        make_core("feedback", INPUT_DIM, dropout=1.5)
    with pytest.raises(ValueError, match="input_dim must be an integer >= 1, got 0"):
        make_core("lstm", 0)
    assert core_options("feedback")["shared_kv"] is True


@pytest.mark.parametrize("name", sorted(CORES))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_a_state_saved_as_plain_data_continues_exactly(name, data):
    # Checkpoints hold core states as plain dicts (weights_only loading builds nothing else); the
    # restored state writes new buffers, so the state it was saved from stays valid beside it.
    core, x, first = data.draw(cases(name))
    split = data.draw(st.integers(0, x.shape[0] - 1))
    with torch.no_grad():
        state = core.initial_state(x.shape[1], "cpu")
        if split:
            _, state = core(x[:split], state, first[:split])
        plain = state_to_plain(state)
        assert all(value is None or isinstance(value, (torch.Tensor, int, float, str)) for value in plain["fields"].values())
        # A saved state drops its weights version (one from another process never matches) and
        # so recomputes its keys and values from the memory: compare with that state here.
        reference = state._replace(version=None) if "version" in state._fields else state
        restored, _ = core(x[split:], state_from_plain(plain), first[split:])
        original, _ = core(x[split:], reference, first[split:])
        again, _ = core(x[split:], reference, first[split:])  # the saved-from state, unchanged by the restored one's call
    assert torch.equal(restored, original) and torch.equal(again, original)


def test_a_feedback_state_saved_before_the_kept_slot_continues_exactly():
    """FeedbackState gained `kept` (the kept slot) with a default: a checkpoint's state saved
    without it loads, and the core goes on from it as from the state it was saved from."""
    torch.manual_seed(0)
    core = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, span=3).double().eval()
    x = torch.randn(7, 2, INPUT_DIM, dtype=torch.float64)
    first = torch.zeros(7, 2, dtype=torch.bool)
    with torch.no_grad():
        _, state = core(x[:4], core.initial_state(2, "cpu"), first[:4])
        plain = state_to_plain(state)
        del plain["fields"]["kept"]
        restored, _ = core(x[4:], state_from_plain(plain), first[4:])
        original, _ = core(x[4:], state._replace(version=None), first[4:])
    assert torch.equal(restored, original)
    with pytest.raises(ValueError, match=r"this version's \['end', 'kept', 'keys', 'log', 'memory', 'valid', 'values', 'version'\]"):
        state_from_plain({"type": "FeedbackState", "fields": {**plain["fields"], "planted": 1}})  # a field it never had


def test_a_saved_state_of_another_shape_is_refused_by_name():
    state = make_core("lstm", INPUT_DIM, hidden_size=4).initial_state(2, "cpu")
    plain = state_to_plain(state)
    with pytest.raises(ValueError, match=r"a saved LSTMState has fields \['h'\], this version's \['c', 'h'\]"):
        state_from_plain({"type": "LSTMState", "fields": {"h": plain["fields"]["h"]}})
    with pytest.raises(ValueError, match="not a saved core state"):
        state_from_plain({"type": "Planted", "fields": {}})
