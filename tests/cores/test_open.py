"""Cores fed one step at a time within one call (core.open) equal forward() over the same inputs:
the steps' outputs, the outputs handed over with gradients at the end (run.outputs()), the state."""

import pytest
import torch

from agents.cores import make_core

OPTIONS = {
    "feedback": {"d_model": 16, "n_layers": 2, "n_heads": 2, "span": 4},
    "lstm": {"hidden_size": 12, "n_layers": 2},
    "gru": {"hidden_size": 12, "n_layers": 2},
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_open_equals_forward_in_outputs_state_and_gradients(name):
    torch.manual_seed(0)
    core = make_core(name, 5, **OPTIONS[name])
    T, B = 7, 3
    first = torch.rand(T, B) < 0.3
    _, state = core(torch.randn(6, B, 5), core.initial_state(B, "cpu"), torch.zeros(6, B, dtype=torch.bool))  # memory carried in
    x = torch.randn(T, B, 5)
    weights = torch.randn(T, B, core.output_dim)

    y, after = core(x, state, first)
    (y * weights).sum().backward()
    expected = {n: p.grad.clone() for n, p in core.named_parameters()}
    core.zero_grad()

    run = core.open(state, T)
    y_steps = torch.stack([run.step(x[t], first[t]) for t in range(T)])
    y_run = run.outputs()
    (y_run * weights).sum().backward()
    stepped = run.finish()

    torch.testing.assert_close(y_steps, y.detach())
    torch.testing.assert_close(y_run, y)
    assert not any(isinstance(a, torch.Tensor) and a.requires_grad for a in stepped)
    with torch.no_grad():  # the two states continue alike
        x_next, first_next = torch.randn(4, B, 5), torch.rand(4, B) < 0.3
        torch.testing.assert_close(core(x_next, stepped, first_next)[0], core(x_next, after, first_next)[0])
    for n, p in core.named_parameters():
        torch.testing.assert_close(p.grad, expected[n], msg=n)
    with pytest.raises(RuntimeError, match="opened for 7 steps"):
        run.step(x[0], first[0])


@pytest.mark.parametrize("name", sorted(OPTIONS))
@pytest.mark.parametrize("grad", [True, False])
def test_a_run_refuses_steps_after_its_outputs_and_everything_after_finish(name, grad):
    """outputs() hands the steps taken over (to autograd, whose backward walks exactly those):
    a later step could not join them. finish() hands the buffers on to the next call."""
    torch.manual_seed(0)
    core = make_core(name, 5, **OPTIONS[name])
    x, first = torch.randn(3, 2, 5), torch.zeros(3, 2, dtype=torch.bool)
    with torch.set_grad_enabled(grad):
        run = core.open(core.initial_state(2, "cpu"), 3)
        run.step(x[0], first[0])
        run.outputs()
        with pytest.raises(RuntimeError, match=r"step\(\) after outputs\(\): the outputs of this run's 1 steps were handed over"):
            run.step(x[1], first[1])
        run.finish()
        with pytest.raises(RuntimeError, match=r"outputs\(\) after finish\(\): this run handed its state"):
            run.outputs()
        with pytest.raises(RuntimeError, match=r"step\(\) after finish\(\): this run handed its state on"):
            run.step(x[1], first[1])
