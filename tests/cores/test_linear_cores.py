"""The linear recurrent cores (agents/cores/ffm.py, lru.py) and their scan (linear_scan.py) against
their definitions, written here one step at a time from the papers' equations: outputs, the
carried state and every gradient, in float64, over shapes, chunk sizes and episode starts drawn by
hypothesis. (The interface every core keeps, chunked calls equal to one call and episodes
isolated included, is tests/cores/test_interface.py's.)"""

import math
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.cores import linear_scan as scan_module
from agents.cores import make_core
from agents.cores.linear_scan import linear_scan

TOL = dict(rtol=1e-9, atol=1e-10)


def recurrence_by_steps(decay, inputs, first, state):
    """h_t = decay * h_{t-1} + v_t, h_t = v_t where first[t]: one step at a time."""
    states = []
    for t in range(inputs.shape[0]):
        state = torch.where(first[t][:, None], torch.zeros_like(state), decay * state) + inputs[t]
        states.append(state)
    return torch.stack(states)


@st.composite
def calls(draw, max_steps=40):
    steps, batch = draw(st.integers(1, max_steps)), draw(st.integers(1, 3))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    first = torch.rand(steps, batch) < draw(st.sampled_from([0.0, 0.1, 0.5]))
    return steps, batch, first


def gradients(outputs, leaves):
    """d(sum of outputs weighted at random)/d(each leaf)."""
    weights = [torch.randn_like(torch.view_as_real(o) if o.is_complex() else o, generator=torch.Generator().manual_seed(9)) for o in outputs]
    total = sum((torch.view_as_real(o) if o.is_complex() else o).mul(w).sum() for o, w in zip(outputs, weights))
    return torch.autograd.grad(total, leaves, retain_graph=True)  # the two sides share the weights' graph


@pytest.mark.parametrize("devices", [("cpu",), ()], ids=["stepwise", "doubling"])  # the CPU's way, and a GPU's
@settings(derandomize=True, max_examples=40, deadline=None)
@given(call=calls(), units=st.integers(1, 5), chunk=st.sampled_from([1, 2, 3, 8, 256]))
def test_the_scan_is_the_recurrence_step_by_step(devices, call, units, chunk):
    steps, batch, first = call
    modulus = torch.rand(units, dtype=torch.float64, requires_grad=True)
    phase = (torch.rand(units, dtype=torch.float64) * 6).requires_grad_()
    inputs = torch.randn(steps, batch, units, dtype=torch.complex128, requires_grad=True)
    state = torch.randn(batch, units, dtype=torch.complex128, requires_grad=True)
    decay = torch.polar(modulus, phase)
    with mock.patch.object(scan_module, "STEPWISE_DEVICES", devices):
        got = linear_scan(decay, inputs, first, state, chunk=chunk)
    want = recurrence_by_steps(decay, inputs, first, state)
    torch.testing.assert_close(got, want, **TOL)
    for g, w in zip(gradients([got], [modulus, phase, inputs, state]), gradients([want], [modulus, phase, inputs, state])):
        torch.testing.assert_close(g, w, **TOL)


def lru_by_steps(core, x, state, first):
    """The LRU core from the paper's equations, one step at a time (lru.py's docstring)."""
    u = core.embed(x)
    carried = torch.view_as_complex(state.x)
    last = []
    for layer, block in enumerate(core.blocks):
        lru = block.lru
        lam = torch.exp(-torch.exp(lru.nu_log) + 1j * torch.exp(lru.theta_log))
        b = torch.complex(lru.b_re, lru.b_im)  # (N, H)
        c = torch.complex(lru.c_re, lru.c_im)  # (H, N)
        h, ys = carried[:, layer], []
        z = block.norm(u)
        for t in range(x.shape[0]):
            h = torch.where(first[t][:, None], torch.zeros_like(h), lam * h) + torch.exp(lru.gamma_log) * (z[t].to(b.dtype) @ b.T)
            ys.append((h @ c.T).real + lru.d * z[t])
        u = u + F.glu(block.glu(F.gelu(torch.stack(ys))), dim=-1)
        last.append(h)
    return core.norm(u), torch.stack(last, dim=1)


def ffm_by_steps(core, x, state, first):
    """The FFM cell from the paper's equations, one step at a time (ffm.py's docstring)."""
    c = core.config
    s = torch.view_as_complex(state.s)  # (B, m, c)
    gamma = torch.exp(-core.alpha.abs())[:, None] * torch.exp(1j * core.omega)[None, :]  # (m, c)
    ys = []
    for t in range(x.shape[0]):
        value, gate_in, skip, gate_out = core.pre(x[t]).split([c.memory_size, c.memory_size, c.d_model, c.d_model], dim=-1)
        into = (value * torch.sigmoid(gate_in))[:, :, None].to(s.dtype)  # (B, m, 1): x~ 1_c^T
        s = torch.where(first[t][:, None, None], torch.zeros_like(s), gamma * s) + into
        z = core.mix(torch.cat([s.real.flatten(1), s.imag.flatten(1)], dim=-1))
        g = torch.sigmoid(gate_out)
        ys.append(F.layer_norm(z, (c.d_model,)) * g + skip * (1 - g))
    return torch.stack(ys), s


CORES = {
    "lru": (lru_by_steps, lambda draw: dict(d_model=draw(st.integers(1, 6)), state_size=draw(st.integers(1, 5)),
                                            n_layers=draw(st.integers(1, 2)), r_min=0.5, r_max=0.99)),
    "ffm": (ffm_by_steps, lambda draw: dict(d_model=draw(st.integers(1, 6)), memory_size=draw(st.integers(1, 5)),
                                            context_size=draw(st.integers(1, 3)), max_period=draw(st.integers(1, 32)))),
}


@pytest.mark.parametrize("name", sorted(CORES))
@settings(derandomize=True, max_examples=25, deadline=None)
@given(data=st.data())
def test_the_core_is_its_equations_step_by_step(name, data):
    by_steps, draw_options = CORES[name]
    steps, batch, first = data.draw(calls(max_steps=24))
    core = make_core(name, 3, **draw_options(data.draw)).double()
    x = torch.randn(steps, batch, 3, dtype=torch.float64, requires_grad=True)
    state = core.initial_state(batch, "cpu")
    state = type(state)(torch.randn_like(state[0]).requires_grad_())  # a carried memory, not zeros
    y, after = core(x, state, first)
    want_y, want_state = by_steps(core, x, state, first)
    torch.testing.assert_close(y, want_y, **TOL)
    torch.testing.assert_close(after[0], torch.view_as_real(want_state).reshape(after[0].shape).detach(), **TOL)
    leaves = [x, state[0], *core.parameters()]
    for g, w in zip(gradients([y], leaves), gradients([want_y], leaves)):
        torch.testing.assert_close(g, w, **TOL)


def test_the_lru_starts_on_its_ring_and_normalises_its_input():
    core = make_core("lru", 4, d_model=8, state_size=512, r_min=0.4, r_max=0.9)
    layer = core.blocks[0].lru
    modulus = layer.decay(torch.float32).abs()
    assert modulus.min() >= 0.4 - 1e-6 and modulus.max() <= 0.9 + 1e-6
    assert modulus.min() < 0.45 and modulus.max() > 0.85  # it fills the ring
    torch.testing.assert_close(torch.exp(layer.gamma_log), torch.sqrt(1 - modulus**2))
    assert layer.decay(torch.float32).angle().abs().max() <= math.pi + 1e-6


def test_the_ffm_starts_from_its_periods():
    core = make_core("ffm", 4, memory_size=6, context_size=3, min_period=2, max_period=100)
    torch.testing.assert_close(core.omega.detach(), 2 * math.pi / torch.tensor([2.0, 51.0, 100.0]))
    kept = torch.exp(-core.alpha.abs().detach())
    torch.testing.assert_close(kept[0], torch.tensor(0.5))  # the fastest channel halves every step
    torch.testing.assert_close(kept[-1] ** 100, torch.tensor(0.01))  # the slowest keeps 1% after max_period


@pytest.mark.parametrize("name, options, message", [
    ("lru", {"r_min": 0.9, "r_max": 0.5}, r"^r_max must be in \(0.9, 1.0\) \(r_min < r_max < 1\), got 0.5$"),
    ("lru", {"r_min": -0.1}, r"^r_min must be in \[0.0, 1.0\), got -0.1$"),
    ("lru", {"max_phase": 0}, r"^max_phase must be a finite number > 0.0, got 0$"),
    ("ffm", {"min_period": 8, "max_period": 4}, r"^max_period must be an integer >= 8, got 4$"),
    ("ffm", {"context_size": 0}, r"^context_size must be an integer >= 1, got 0$"),
])
def test_bad_options_are_refused_by_name(name, options, message):
    with pytest.raises(ValueError, match=message):
        make_core(name, 3, **options)
