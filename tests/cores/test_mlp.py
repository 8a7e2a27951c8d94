"""MLP core: the no-memory control. Its output at a step depends on that step's input only."""

import pytest
import torch

from agents.cores import make_core
from agents.cores.mlp import MLPConfig, MLPState

INPUT_DIM = 5


def test_output_depends_on_the_current_input_only():
    torch.manual_seed(0)
    core = make_core("mlp", INPUT_DIM, hidden_size=8, n_layers=3)
    x = torch.randn(6, 2, INPUT_DIM)
    y, state = core(x, core.initial_state(2, "cpu"), torch.zeros(6, 2, dtype=torch.bool))
    changed = x.clone()
    changed[:3] += 5.0 * torch.randn(3, 2, INPUT_DIM)
    y_changed, _ = core(changed, state, torch.rand(6, 2) < 0.5)
    torch.testing.assert_close(y_changed[3:], y[3:], atol=0, rtol=0)
    for t in range(6):  # each step alone, from a fresh state
        y_t, _ = core(x[t : t + 1], core.initial_state(2, "cpu"), torch.ones(1, 2, dtype=torch.bool))
        torch.testing.assert_close(y_t[0], y[t], atol=1e-6, rtol=0)


def test_shapes_layers_and_empty_state():
    core = make_core("mlp", INPUT_DIM, hidden_size=7, n_layers=3)
    assert core.output_dim == 7
    assert [m.in_features for m in core.net if isinstance(m, torch.nn.Linear)] == [INPUT_DIM, 7, 7]
    state = core.initial_state(4, "cpu")
    assert state == MLPState() and len(state) == 0
    y, _ = core(torch.randn(2, 4, INPUT_DIM), state, torch.zeros(2, 4, dtype=torch.bool))
    assert y.shape == (2, 4, 7)


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="n_layers must be an integer >= 1, got 0"):
        MLPConfig(n_layers=0)
    with pytest.raises(ValueError, match="hidden_size must be an integer >= 1, got True"):
        make_core("mlp", INPUT_DIM, hidden_size=True)
