"""The Feedback core's ring (agents/cores/feedback/ring.py), the acting step a CUDA graph captures:
step for step equal to the core's own acting calls (outputs, and the state it hands back), across
episode starts, the variants, a state taken over mid-episode and weights changed between loads;
on the meta device it makes no stray host tensor and reads nothing back; and its tensors keep
their addresses, which a captured graph replays on."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from agents.cores import make_core
from agents.cores.feedback.ring import FeedbackRing

INPUT_DIM, BATCH, SPAN = 5, 3, 4
VARIANTS = [dict(), dict(pre_norm=False, shared_kv=False), dict(n_layers=3, read_norm=False), dict(persistent=2),
            dict(memory_write="tanh", read_norm=False), dict(memory_write="tanh", carry="gate"), dict(keep_slot=True),
            dict(keep_slot=True, carry="gate", memory_write="tanh", shared_kv=False, persistent=2)]


def core_of(options: dict, step: str = "python", dtype=torch.float64):
    torch.manual_seed(0)
    core = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, span=SPAN, step=step, **options).to(dtype).eval()
    with torch.no_grad():
        for p in core.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return core


def window(state) -> tuple:
    """What a FeedbackState holds that a later call reads: its last S slots, their validity and the kept slot."""
    last = slice(state.end - SPAN, state.end)
    return state.memory[:, last], state.keys[..., last], state.values[..., last], state.valid, state.kept


def inputs(steps: int, reset: float, seed: int, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, BATCH, INPUT_DIM, generator=generator, dtype=dtype)
    return x, torch.rand(steps, BATCH, generator=generator) < reset


def close(dtype) -> dict:
    """The sums over slots run in another order: float rounding over a handful of terms."""
    eps = torch.finfo(dtype).eps
    return dict(rtol=64 * eps, atol=64 * eps)


def act_both(core, x, first, warm: int = 0):
    """The core's acting calls (T = 1 each) and the ring's steps over x, from the state after
    `warm` steps of the core's own; -> both outputs (T, B, D) and both final states."""
    with torch.no_grad():
        state = core.initial_state(BATCH, "cpu")
        if warm:
            _, state = core(x[:warm], state, first[:warm])
        ring = FeedbackRing(core, BATCH, torch.device("cpu"))
        ring.load(state)
        ours, theirs = [], []
        for t in range(warm, x.shape[0]):
            y, state = core(x[t : t + 1], state, first[t : t + 1])
            theirs.append(y[0])
            ours.append(ring.step(x[t], first[t]))
    return torch.stack(ours), torch.stack(theirs), ring.state(), state


@pytest.mark.parametrize("options", VARIANTS)
@pytest.mark.parametrize("step", ["python", "auto"])  # auto: the compiled step where the variant has one
def test_the_ring_acts_as_the_core_does(options, step):
    core = core_of(options, step)
    x, first = inputs(3 * SPAN + 5, 0.15, seed=1)
    ours, theirs, ring_state, state = act_both(core, x, first, warm=SPAN + 1)
    torch.testing.assert_close(ours, theirs, **close(torch.float64))
    for name, a, b in zip(("memory", "keys", "values", "valid", "kept"), window(ring_state), window(state)):
        if name == "valid":
            assert torch.equal(a, b), "valid differs"
        else:
            torch.testing.assert_close(a, b, **close(torch.float64), msg=f"{name} differs")


@settings(max_examples=25, deadline=None)
@given(steps=st.integers(1, 3 * SPAN), warm=st.integers(0, 2 * SPAN), reset=st.sampled_from([0.0, 0.2, 0.6, 1.0]), seed=st.integers(0, 99),
       keep_slot=st.booleans())
def test_the_ring_acts_as_the_core_does_whatever_the_episode_starts(steps, warm, reset, seed, keep_slot):
    """Any number of steps, from any state of the core's (empty, partly full, full), with episodes
    starting anywhere, with and without the kept slot: the same outputs and the same state handed back."""
    core = core_of({"keep_slot": keep_slot})
    x, first = inputs(warm + steps, reset, seed)
    ours, theirs, ring_state, state = act_both(core, x, first, warm=warm)
    torch.testing.assert_close(ours, theirs, **close(torch.float64))
    assert torch.equal(ring_state.valid, state.valid)
    torch.testing.assert_close(window(ring_state)[0], window(state)[0], **close(torch.float64))
    torch.testing.assert_close(ring_state.kept, state.kept, **close(torch.float64))


@pytest.mark.parametrize("options", [{}, {"keep_slot": True}])
def test_the_core_goes_on_from_the_ring_state_as_from_its_own(options):
    """state() is a FeedbackState the core continues from: its next calls (several steps, with the
    keys the ring made reused) equal those from the core's own state."""
    core = core_of(options)
    x, first = inputs(2 * SPAN + 6, 0.2, seed=2)
    _, _, ring_state, state = act_both(core, x[: 2 * SPAN], first[: 2 * SPAN])
    with torch.no_grad():
        ours, _ = core(x[2 * SPAN :], ring_state, first[2 * SPAN :])
        theirs, _ = core(x[2 * SPAN :], state, first[2 * SPAN :])
    torch.testing.assert_close(ours, theirs, **close(torch.float64))


def test_a_load_after_the_weights_change_acts_with_the_new_weights():
    """The steps read the weights of the last load, into the same tensors: after an optimiser
    step, load again and the ring acts as the core does with its new weights."""
    core = core_of({})
    x, first = inputs(2 * SPAN, 0.1, seed=3)
    with torch.no_grad():
        state = core.initial_state(BATCH, "cpu")
        ring = FeedbackRing(core, BATCH, torch.device("cpu"))
        ring.load(state)
        addresses = [w.data_ptr() for w in ring.weights[1][0] if w is not None]
        for t in range(SPAN):
            ring.step(x[t], first[t])
            _, state = core(x[t : t + 1], state, first[t : t + 1])
        for p in core.parameters():
            p.mul_(0.9)
        ring.load(ring.state())
        assert [w.data_ptr() for w in ring.weights[1][0] if w is not None] == addresses
        ours = torch.stack([ring.step(x[t], first[t]) for t in range(SPAN, 2 * SPAN)])
        theirs, _ = core(x[SPAN:], state, first[SPAN:])
    torch.testing.assert_close(ours, theirs, **close(torch.float64))


def test_the_ring_keeps_its_addresses():
    """A captured graph replays on the addresses it saw: no step or load moves a tensor of the ring."""
    core = core_of({"keep_slot": True}, dtype=torch.float32)
    ring = FeedbackRing(core, BATCH, torch.device("cpu"))
    ring.load(core.initial_state(BATCH, "cpu"))
    tensors = [ring.memory, ring.keys, ring.values, ring.head, ring.count, ring.kept, ring.kept_keys, ring.kept_values]
    before = [t.data_ptr() for t in tensors]
    x, first = inputs(SPAN + 2, 0.3, seed=4, dtype=torch.float32)
    with torch.no_grad():
        for t in range(x.shape[0]):
            ring.step(x[t], first[t])
    ring.load(ring.state())
    assert [t.data_ptr() for t in tensors] == before


@pytest.mark.parametrize("options", [{}, {"keep_slot": True, "carry": "gate"}])
def test_the_ring_runs_on_the_meta_device(options):
    """No stray host tensor, no read-back (tests/cores/test_meta_device.py says why meta)."""
    meta = torch.device("meta")
    torch.manual_seed(0)
    core = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, span=SPAN, **options).to(meta).eval()
    ring = FeedbackRing(core, BATCH, meta)
    ring.load(core.initial_state(BATCH, meta))
    with torch.no_grad():
        y = ring.step(torch.randn(BATCH, INPUT_DIM, device=meta), torch.zeros(BATCH, dtype=torch.bool, device=meta))
    state = ring.state()
    assert y.device == meta and y.shape == (BATCH, 8)
    assert all(t.device == meta for t in (state.memory, state.keys, state.values, state.valid, state.kept))


def test_dropout_in_training_mode_is_refused():
    core = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, span=SPAN, dropout=0.1).train()
    with pytest.raises(ValueError, match="dropout=0.1"):
        FeedbackRing(core, BATCH, torch.device("cpu"))
