"""LSTM core against the LSTM equations stepped by hand, its fast and split paths, its state."""

import pytest
import torch

from agents.cores import make_core
from agents.cores.lstm import LSTMConfig

INPUT_DIM = 5


def reference(lstm, x, first):
    """The LSTM equations one step and one layer at a time, state zeroed where `first`."""
    steps, batch, _ = x.shape
    h = [torch.zeros(batch, lstm.hidden_size) for _ in range(lstm.num_layers)]
    c = [torch.zeros(batch, lstm.hidden_size) for _ in range(lstm.num_layers)]
    outputs = []
    for t in range(steps):
        inp = x[t]
        for layer in range(lstm.num_layers):
            keep = (~first[t]).float()[:, None]
            h[layer], c[layer] = h[layer] * keep, c[layer] * keep
            w_ih, w_hh = getattr(lstm, f"weight_ih_l{layer}"), getattr(lstm, f"weight_hh_l{layer}")
            b = getattr(lstm, f"bias_ih_l{layer}") + getattr(lstm, f"bias_hh_l{layer}")
            i, f, g, o = (inp @ w_ih.T + h[layer] @ w_hh.T + b).chunk(4, dim=-1)
            c[layer] = torch.sigmoid(f) * c[layer] + torch.sigmoid(i) * torch.tanh(g)
            h[layer] = torch.sigmoid(o) * torch.tanh(c[layer])
            inp = h[layer]
        outputs.append(inp)
    return torch.stack(outputs), torch.stack(h, dim=1), torch.stack(c, dim=1)


def lstm_calls(core):
    """A list that grows by one at every nn.LSTM call of `core`."""
    calls = []
    core.lstm.register_forward_hook(lambda *_: calls.append(1))
    return calls


@pytest.mark.parametrize("n_layers", [1, 2])
@pytest.mark.parametrize("reset_rate", [0.0, 0.3])
def test_matches_the_equations_stepped_by_hand(n_layers, reset_rate):
    torch.manual_seed(0)
    core = make_core("lstm", INPUT_DIM, hidden_size=6, n_layers=n_layers)
    x = torch.randn(9, 3, INPUT_DIM)
    first = torch.rand(9, 3) < reset_rate
    first[0] = True
    y, state = core(x, core.initial_state(3, "cpu"), first)
    expected_y, expected_h, expected_c = reference(core.lstm, x, first)
    torch.testing.assert_close(y, expected_y, atol=1e-5, rtol=0)
    torch.testing.assert_close(state.h, expected_h, atol=1e-5, rtol=0)
    torch.testing.assert_close(state.c, expected_c, atol=1e-5, rtol=0)


def test_a_chunk_without_resets_after_its_first_step_is_one_call():
    torch.manual_seed(0)
    core = make_core("lstm", INPUT_DIM, hidden_size=6)
    calls = lstm_calls(core)
    x = torch.randn(8, 2, INPUT_DIM)
    first = torch.zeros(8, 2, dtype=torch.bool)
    first[0, 1] = True
    core(x, core.initial_state(2, "cpu"), first)
    assert len(calls) == 1
    first[[3, 6], 0] = True
    core(x, core.initial_state(2, "cpu"), first)
    assert len(calls) == 1 + 3  # split at steps 3 and 6


def test_split_path_equals_fast_path_for_the_envs_that_do_not_reset():
    """Env 0 resets mid-chunk (the split path); env 1 does not, and gets what it gets alone."""
    torch.manual_seed(0)
    core = make_core("lstm", INPUT_DIM, hidden_size=6, n_layers=2)
    x = torch.randn(8, 2, INPUT_DIM)
    _, carried = core(torch.randn(3, 2, INPUT_DIM), core.initial_state(2, "cpu"), torch.ones(3, 2, dtype=torch.bool))
    first = torch.zeros(8, 2, dtype=torch.bool)
    first[[2, 5], 0] = True
    y, state = core(x, carried, first)
    alone = type(carried)(*(t[1:] for t in carried))
    y_alone, state_alone = core(x[:, 1:], alone, first[:, 1:])
    torch.testing.assert_close(y[:, 1:], y_alone, atol=1e-6, rtol=0)
    torch.testing.assert_close(state.h[1:], state_alone.h, atol=1e-6, rtol=0)


def test_state_is_batch_major_and_detached():
    core = make_core("lstm", INPUT_DIM, hidden_size=7, n_layers=3)
    state = core.initial_state(4, "cpu")
    assert state.h.shape == state.c.shape == (4, 3, 7)
    y, state = core(torch.randn(5, 4, INPUT_DIM, requires_grad=True), state, torch.zeros(5, 4, dtype=torch.bool))
    assert y.shape == (5, 4, 7) and core.output_dim == 7
    assert state.h.shape == state.c.shape == (4, 3, 7)
    assert not state.h.requires_grad and not state.c.requires_grad


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="hidden_size must be an integer >= 1, got 0"):
        LSTMConfig(hidden_size=0)
    with pytest.raises(ValueError, match="n_layers must be an integer >= 1, got 1.5"):
        make_core("lstm", INPUT_DIM, n_layers=1.5)
