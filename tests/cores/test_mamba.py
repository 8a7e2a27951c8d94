"""The Mamba core (agents/cores/mamba.py) and the scan it runs on with per-step decays
(linear_scan.py) against their definitions, written here one step at a time from the paper's
equations: outputs, the carried state (the SSM state and the convolution's window) and every
gradient, in float64, over shapes, chunk sizes and episode starts drawn by hypothesis; the scan
both ways it runs (one step after another, a CPU's; doubling rounds, a GPU's). Also its
initialisation and its options refused by name. (The interface every core keeps is
tests/cores/test_interface.py's, with mamba among its cores.)"""

import math
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.cores import linear_scan as scan_module
from agents.cores import make_core, mamba
from agents.cores.linear_scan import linear_scan
from tests.cores.test_linear_cores import calls  # shapes, a seed and episode starts of one call

TOL = dict(rtol=1e-9, atol=1e-10)
# The two ways the scan runs: one step after another (on a CPU) and by doubling rounds (a GPU).
WAYS = pytest.mark.parametrize("devices", [("cpu",), ()], ids=["stepwise", "doubling"])


def gradients(outputs, leaves):
    """d(sum of outputs weighted at random)/d(each leaf)."""
    generator = torch.Generator().manual_seed(9)
    real = [torch.view_as_real(o) if o.is_complex() else o for o in outputs]
    total = sum((o * torch.randn(o.shape, dtype=o.dtype, generator=generator)).sum() for o in real)
    return torch.autograd.grad(total, leaves, retain_graph=True, allow_unused=True)


def assert_same_gradients(got, want):
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if g is not None:
            torch.testing.assert_close(g, w, **TOL)


def selective_recurrence_by_steps(decay, inputs, first, state):
    """h_t = decay_t * h_{t-1} + v_t, h_t = v_t where first[t]: one step at a time."""
    states = []
    for t in range(inputs.shape[0]):
        state = torch.where(first[t][:, None], torch.zeros_like(state), decay[t] * state) + inputs[t]
        states.append(state)
    return torch.stack(states)


@WAYS
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@settings(derandomize=True, max_examples=30, deadline=None)
@given(call=calls(), units=st.integers(1, 5), chunk=st.sampled_from([1, 2, 3, 8, 256]))
def test_the_scan_with_a_decay_per_step_is_the_recurrence_step_by_step(devices, dtype, call, units, chunk):
    steps, batch, first = call
    modulus = torch.rand(steps, batch, units, dtype=torch.float64, requires_grad=True)
    phase = (torch.rand(steps, batch, units, dtype=torch.float64) * 6).requires_grad_()
    inputs = torch.randn(steps, batch, units, dtype=dtype, requires_grad=True)
    state = torch.randn(batch, units, dtype=dtype, requires_grad=True)
    decay = modulus if dtype == torch.float64 else torch.polar(modulus, phase)
    with mock.patch.object(scan_module, "STEPWISE_DEVICES", devices):
        got = linear_scan(decay, inputs, first, state, chunk=chunk)
    want = selective_recurrence_by_steps(decay, inputs, first, state)
    torch.testing.assert_close(got, want, **TOL)
    leaves = [modulus, inputs, state] + ([phase] if dtype == torch.complex128 else [])
    assert_same_gradients(gradients([got], leaves), gradients([want], leaves))


def test_the_scan_refuses_a_decay_of_another_shape():
    inputs, first, state = torch.randn(4, 2, 3), torch.zeros(4, 2, dtype=torch.bool), torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"^decay must have shape \(N,\) or the inputs' \(T, B, N\) = \(4, 2, 3\); got \(4, 1, 3\)$"):
        linear_scan(torch.rand(4, 1, 3), inputs, first, state)


def mamba_by_steps(core, x, h0, window0, first):
    """The Mamba core from the paper's equations, one step at a time (mamba.py's docstring): at
    an episode start the state and every convolution input before it are zeroed."""
    taps = core.config.d_conv
    u = core.embed(x)  # (T, B, D)
    hs, windows = [], []
    for layer, block in enumerate(core.blocks):
        m = block.mixer
        e, n, r = m.sizes
        a = -torch.exp(m.A_log)  # (E, N)
        h = h0[:, layer]  # (B, E, N)
        past = [window0[:, layer, j] for j in range(taps - 1)]  # k - 1 of (B, E), oldest first
        ys = []
        for t in range(x.shape[0]):
            start = first[t][:, None]  # (B, 1)
            past = [torch.where(start, torch.zeros_like(p), p) for p in past]
            h = torch.where(start[..., None], torch.zeros_like(h), h)
            x_t, z_t = m.in_proj(block.norm(u[t])).split([e, e], dim=-1)  # (B, E) each
            taps_in = [*past, x_t]  # oldest first: tap j reads the input k - 1 - j steps back
            c = F.silu(m.conv_bias + sum(m.conv_weight[:, j] * taps_in[j] for j in range(taps)))
            low, b, c_out = m.x_proj(c).split([r, n, n], dim=-1)
            delta = F.softplus(m.dt_proj(low))  # (B, E)
            h = torch.exp(delta[..., None] * a) * h + delta[..., None] * b[:, None, :] * c[..., None]
            y = (h * c_out[:, None, :]).sum(-1) + m.D * c
            ys.append(m.out_proj(y * F.silu(z_t)))
            past = taps_in[1:]
        u = u + torch.stack(ys)
        hs.append(h)
        windows.append(torch.stack(past, dim=1) if past else window0[:, layer])
    return core.norm(u), torch.stack(hs, dim=1), torch.stack(windows, dim=1)


@st.composite
def options(draw):
    return dict(d_model=draw(st.integers(1, 6)), d_state=draw(st.integers(1, 4)), d_conv=draw(st.integers(1, 5)),
                expand=draw(st.integers(1, 2)), n_layers=draw(st.integers(1, 2)), dt_rank=draw(st.sampled_from([0, 1, 3])))


@settings(derandomize=True, max_examples=40, deadline=None)
@given(data=st.data())
def test_the_core_is_its_equations_step_by_step(data):
    """Through the CPU's stepwise scan; the doubling rounds (a GPU's) are the scan's test's other half."""
    steps, batch, first = data.draw(calls(max_steps=24))
    core = make_core("mamba", 3, **data.draw(options())).double()
    with torch.no_grad():  # weights off their initial values, so every term counts
        for p in core.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = torch.randn(steps, batch, 3, dtype=torch.float64, requires_grad=True)
    state = core.initial_state(batch, "cpu")
    h0 = torch.randn_like(state.h).requires_grad_()  # a carried memory, not zeros
    window0 = torch.randn_like(state.conv).requires_grad_()
    y, after = core(x, mamba.MambaState(h0, window0), first)
    want_y, want_h, want_window = mamba_by_steps(core, x, h0, window0, first)
    torch.testing.assert_close(y, want_y, **TOL)
    torch.testing.assert_close(after.h, want_h.detach(), **TOL)
    torch.testing.assert_close(after.conv, want_window.detach(), **TOL)
    leaves = [x, h0, window0, *core.parameters()]
    assert_same_gradients(gradients([y], leaves), gradients([want_y], leaves))


@settings(derandomize=True, max_examples=20, deadline=None)
@given(data=st.data())
def test_acting_a_step_a_call_carries_the_state_and_the_window(data):
    """T calls of one step (acting: no gradients) equal the equations stepped by hand, state and
    window included, with episode starts between the calls."""
    steps, batch, first = data.draw(calls(max_steps=12))
    core = make_core("mamba", 3, **data.draw(options())).double()
    x = torch.randn(steps, batch, 3, dtype=torch.float64)
    state = core.initial_state(batch, "cpu")
    with torch.no_grad():
        ys = []
        for t in range(steps):
            y, state = core(x[t : t + 1], state, first[t : t + 1])
            ys.append(y)
        want_y, want_h, want_window = mamba_by_steps(core, x, *core.initial_state(batch, "cpu"), first)
    torch.testing.assert_close(torch.cat(ys), want_y, **TOL)
    torch.testing.assert_close(state.h, want_h, **TOL)
    torch.testing.assert_close(state.conv, want_window, **TOL)


def test_the_convolution_does_not_read_across_an_episode_start_within_a_call_or_across_calls():
    """With the SSM's read-out switched off (C = 0, so y = D c), an output is its convolution of
    the inputs since the episode began: changing an input just before a start changes nothing
    after it, whether the start is in the same call or in the next one."""
    torch.manual_seed(0)
    core = make_core("mamba", 3, d_model=4, d_state=2, d_conv=4, n_layers=1).double()
    with torch.no_grad():
        core.blocks[0].mixer.x_proj.weight[-2:] = 0  # C = 0
    x = torch.randn(6, 1, 3, dtype=torch.float64)
    first = torch.tensor([[True], [False], [False], [True], [False], [False]])
    changed = x.clone()
    changed[2] += 10.0  # the last step of the first episode
    whole = core(x, core.initial_state(1, "cpu"), first)[0]
    assert not torch.allclose(core(changed, core.initial_state(1, "cpu"), first)[0][2], whole[2])  # it is read where it belongs
    torch.testing.assert_close(core(changed, core.initial_state(1, "cpu"), first)[0][3:], whole[3:], **TOL)
    _, state = core(changed[:3], core.initial_state(1, "cpu"), first[:3])  # the episode ends with the call
    torch.testing.assert_close(core(x[3:], state, first[3:])[0], whole[3:], **TOL)
    assert state.conv.abs().sum() > 0  # the window does carry the last inputs, zeroed only by the start
    _, state = core(changed[:4], core.initial_state(1, "cpu"), first[:4])  # the next episode's first step ends the call:
    torch.testing.assert_close(core(x[4:], state, first[4:])[0], whole[4:], **TOL)  # its window must hold no input before it
    assert state.conv[0, 0, -1].abs().sum() > 0 and state.conv[0, 0, :-1].abs().sum() == 0


def test_it_starts_as_the_paper_does():
    core = make_core("mamba", 4, d_model=40, d_state=5, expand=2, dt_min=0.01, dt_max=0.2)
    m = core.blocks[0].mixer
    torch.testing.assert_close(-torch.exp(m.A_log.detach()), -torch.arange(1.0, 6.0).expand(80, 5))  # S4D-real: A_n = -(n + 1)
    torch.testing.assert_close(m.D.detach(), torch.ones(80))
    dt = F.softplus(m.dt_proj.bias.detach())
    assert dt.min() >= 0.01 * (1 - 1e-5) and dt.max() <= 0.2 * (1 + 1e-5) and dt.max() / dt.min() > 5
    assert m.dt_proj.weight.shape == (80, 3) and m.x_proj.weight.shape == (3 + 2 * 5, 80)  # R = ceil(40 / 16)
    assert m.conv_weight.shape == (80, 4) and m.in_proj.weight.shape == (160, 40) and m.out_proj.weight.shape == (40, 80)
    assert m.in_proj.bias is None and m.x_proj.bias is None and m.out_proj.bias is None
    assert make_core("mamba", 4, d_model=40, dt_rank=80).blocks[0].mixer.dt_proj.weight.shape == (80, 80)  # full rank
    state = core.initial_state(3, "cpu")
    assert state.h.shape == (3, 2, 80, 5) and state.conv.shape == (3, 2, 3, 80)


@pytest.mark.parametrize("given, message", [
    ({"d_model": 0}, r"^d_model must be an integer >= 1, got 0$"),
    ({"d_state": 0}, r"^d_state must be an integer >= 1, got 0$"),
    ({"d_conv": 0}, r"^d_conv must be an integer >= 1, got 0$"),
    ({"expand": 1.5}, r"^expand must be an integer >= 1, got 1.5$"),
    ({"n_layers": True}, r"^n_layers must be an integer >= 1, got True$"),
    ({"dt_rank": -1}, r"^dt_rank must be an integer >= 0, got -1$"),
    ({"dt_min": 0.0}, r"^dt_min must be a finite number > 0.0, got 0.0$"),
    ({"dt_min": math.nan}, r"^dt_min must be a finite number > 0.0, got nan$"),
    ({"dt_min": 0.5, "dt_max": 0.1}, r"^dt_max must be in \[0.5, 1000.0\] \(dt_min <= dt_max; .*\), got 0.1$"),
    ({"dt_max": math.inf}, r"^dt_max must be in \[0.001, 1000.0\] .*, got inf$"),
    ({"dt_max": 5000.0}, r"^dt_max must be in \[0.001, 1000.0\] .*, got 5000.0$"),
])
def test_bad_options_are_refused_by_name(given, message):
    with pytest.raises(ValueError, match=message):
        make_core("mamba", 3, **given)
