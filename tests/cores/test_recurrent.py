"""The LSTM and GRU cores against their equations stepped by hand, their fast and split paths,
their state."""

import pytest
import torch
from hypothesis import given, strategies as st

from agents.cores import make_core
from agents.cores import recurrent
from agents.cores.recurrent import RecurrentConfig, pieces

INPUT_DIM = 5
RECURRENT = ("lstm", "gru")


def layer_weights(rnn, layer):
    return [getattr(rnn, f"{name}_l{layer}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


def lstm_by_hand(rnn, layer, x, state):
    """One LSTM layer's step: gates i, f, g, o; state (h, c)."""
    w_ih, w_hh, b_ih, b_hh = layer_weights(rnn, layer)
    h, c = state
    i, f, g, o = (x @ w_ih.T + h @ w_hh.T + b_ih + b_hh).chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def gru_by_hand(rnn, layer, x, state):
    """One GRU layer's step: reset r, update z, candidate n (r gates the recurrent term after its
    bias, as torch's GRU does); state (h,)."""
    w_ih, w_hh, b_ih, b_hh = layer_weights(rnn, layer)
    (h,) = state
    x_r, x_z, x_n = (x @ w_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = (h @ w_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return ((1 - z) * n + z * h,)


BY_HAND = {"lstm": (lstm_by_hand, 2), "gru": (gru_by_hand, 1)}  # name: (a layer's step, state tensors)


def reference(name, rnn, x, first):
    """The equations one step and one layer at a time, state zeroed where `first`: y (T, B, H)
    and each state tensor (B, L, H)."""
    step, n_states = BY_HAND[name]
    steps, batch, _ = x.shape
    states = [[torch.zeros(batch, rnn.hidden_size)] * n_states for _ in range(rnn.num_layers)]
    outputs = []
    for t in range(steps):
        inp = x[t]
        keep = (~first[t]).float()[:, None]
        for layer in range(rnn.num_layers):
            states[layer] = step(rnn, layer, inp, [s * keep for s in states[layer]])
            inp = states[layer][0]
        outputs.append(inp)
    return torch.stack(outputs), [torch.stack([s[k] for s in states], dim=1) for k in range(n_states)]


def fused_calls(core):
    """A list that grows by one at every call of `core`'s torch RNN."""
    calls = []
    core.rnn.register_forward_hook(lambda *_: calls.append(1))
    return calls


@pytest.mark.parametrize("name", RECURRENT)
@pytest.mark.parametrize("n_layers", [1, 2])
@pytest.mark.parametrize("reset_rate", [0.0, 0.3])
@pytest.mark.parametrize("gate_init", ["pytorch", "chrono"])
def test_matches_the_equations_stepped_by_hand(name, n_layers, reset_rate, gate_init):
    torch.manual_seed(0)
    core = make_core(name, INPUT_DIM, hidden_size=6, n_layers=n_layers, gate_init=gate_init)
    x = torch.randn(9, 3, INPUT_DIM)
    first = torch.rand(9, 3) < reset_rate
    first[0] = True
    y, state = core(x, core.initial_state(3, "cpu"), first)
    expected_y, expected_state = reference(name, core.rnn, x, first)
    torch.testing.assert_close(y, expected_y, atol=1e-5, rtol=0)
    for got, want in zip(state, expected_state, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", RECURRENT)
def test_a_chunk_without_resets_after_its_first_step_is_one_call(name):
    torch.manual_seed(0)
    core = make_core(name, INPUT_DIM, hidden_size=6)
    calls = fused_calls(core)
    x = torch.randn(8, 2, INPUT_DIM)
    first = torch.zeros(8, 2, dtype=torch.bool)
    first[0, 1] = True
    core(x, core.initial_state(2, "cpu"), first)
    assert len(calls) == 1
    first[[3, 6], 0] = True
    core(x, core.initial_state(2, "cpu"), first)
    assert len(calls) == 1 + 3  # split at steps 3 and 6


@given(steps=st.integers(1, 700), cuts=st.sets(st.integers(1, 699)))
def test_pieces_cover_the_call_cut_at_every_reset_and_no_longer_than_fused_steps(steps, cuts):
    cuts = sorted(c for c in cuts if c < steps)
    bounds = pieces(cuts, steps)
    assert [start for start, _ in bounds] == [0] + [end for end, _ in zip((e for _, e in bounds), bounds[1:])]
    assert bounds[0][0] == 0 and bounds[-1][1] == steps and all(start < end for start, end in bounds)
    assert all(end - start <= recurrent.FUSED_STEPS for start, end in bounds)
    assert set(cuts) <= {start for start, _ in bounds}
    assert len(bounds) == sum(-(-(end - start) // recurrent.FUSED_STEPS) for start, end in zip([0, *cuts], [*cuts, steps]))


@pytest.mark.parametrize("name", RECURRENT)
def test_a_call_longer_than_fused_steps_is_cut_into_pieces_with_the_same_outputs_and_gradients(name, monkeypatch):
    """A long learning call runs in pieces of FUSED_STEPS (here 4, so a 13-step call with a reset
    at 6 is 4 calls: [0, 4) [4, 6) [6, 10) [10, 13)): the outputs, the state and the gradients are
    the one-call ones ([0, 6) [6, 13))."""
    torch.manual_seed(0)
    core = make_core(name, INPUT_DIM, hidden_size=6, n_layers=2)
    x = torch.randn(13, 3, INPUT_DIM, requires_grad=True)
    first = torch.zeros(13, 3, dtype=torch.bool)
    first[6, 1] = True
    state = core(torch.randn(2, 3, INPUT_DIM), core.initial_state(3, "cpu"), torch.ones(2, 3, dtype=torch.bool))[1]
    results = []
    for fused_steps in (recurrent.FUSED_STEPS, 4):
        monkeypatch.setattr(recurrent, "FUSED_STEPS", fused_steps)
        calls = fused_calls(core)
        y, after = core(x, state, first)
        y.square().sum().backward()
        results.append((y.detach(), after, x.grad.clone(), [p.grad.clone() for p in core.parameters()], len(calls)))
        x.grad = None
        core.zero_grad()
        core.rnn._forward_hooks.clear()
    (y, after, dx, dw, calls), (y_cut, after_cut, dx_cut, dw_cut, calls_cut) = results
    assert (calls, calls_cut) == (2, 4)
    torch.testing.assert_close(y_cut, y, atol=1e-6, rtol=0)
    for got, want in [*zip(after_cut, after), (dx_cut, dx), *zip(dw_cut, dw)]:
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", RECURRENT)
def test_split_path_equals_fast_path_for_the_envs_that_do_not_reset(name):
    """Env 0 resets mid-chunk (the split path); env 1 does not, and gets what it gets alone."""
    torch.manual_seed(0)
    core = make_core(name, INPUT_DIM, hidden_size=6, n_layers=2)
    x = torch.randn(8, 2, INPUT_DIM)
    _, carried = core(torch.randn(3, 2, INPUT_DIM), core.initial_state(2, "cpu"), torch.ones(3, 2, dtype=torch.bool))
    first = torch.zeros(8, 2, dtype=torch.bool)
    first[[2, 5], 0] = True
    y, state = core(x, carried, first)
    alone = type(carried)(*(t[1:] for t in carried))
    y_alone, state_alone = core(x[:, 1:], alone, first[:, 1:])
    torch.testing.assert_close(y[:, 1:], y_alone, atol=1e-6, rtol=0)
    torch.testing.assert_close(state.h[1:], state_alone.h, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name, fields", [("lstm", ("h", "c")), ("gru", ("h",))])
def test_state_is_batch_major_and_detached(name, fields):
    core = make_core(name, INPUT_DIM, hidden_size=7, n_layers=3)
    state = core.initial_state(4, "cpu")
    assert state._fields == fields and all(t.shape == (4, 3, 7) for t in state)
    y, state = core(torch.randn(5, 4, INPUT_DIM, requires_grad=True), state, torch.zeros(5, 4, dtype=torch.bool))
    assert y.shape == (5, 4, 7) and core.output_dim == 7
    assert all(t.shape == (4, 3, 7) and not t.requires_grad for t in state)


@pytest.mark.parametrize("name", RECURRENT)
def test_bad_options_are_named(name):
    with pytest.raises(ValueError, match="hidden_size must be an integer >= 1, got 0"):
        RecurrentConfig(hidden_size=0)
    with pytest.raises(ValueError, match="n_layers must be an integer >= 1, got 1.5"):
        make_core(name, INPUT_DIM, n_layers=1.5)
