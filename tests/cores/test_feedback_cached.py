"""The Feedback core over memory written while acting (agents/cores/feedback/cached.py): with the
weights acting had, all steps at once give acting's outputs; no gradient reaches the memory."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.cores.feedback import cached
from agents.cores.feedback.cached import cached_forward
from agents.cores.feedback.reference import reference_of
from tests.cores.test_feedback_paths import INPUT_DIM, build, configurations
from tests.float32 import close32


def acted(core, x0, x, first):
    """A carried call, then x one step at a time without gradients, as acting runs it -> the
    state before x, y (T, B, D), the memory each step wrote (T, B, D)."""
    batch = x.shape[1]
    with torch.no_grad():
        state = core.initial_state(batch, "cpu")
        if len(x0):
            _, state = core(x0, state, torch.zeros(x0.shape[:2], dtype=torch.bool))
        start, outputs, written = state, [], []
        for t in range(x.shape[0]):
            y, state = core(x[t : t + 1], state, first[t : t + 1])
            outputs.append(y[0])
            written.append(core.written_memory(state))
    return start, torch.stack(outputs), torch.stack(written)


@pytest.mark.parametrize("windowed_from", [1, cached.WINDOWED_FROM])  # each step's window, or the full matrix (these calls' sizes)
@settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(options=configurations(), seed=st.integers(0, 2**16), steps=st.integers(1, 9), batch=st.integers(1, 3),
       reset=st.sampled_from([0.0, 0.3]), carried=st.integers(0, 7), step=st.sampled_from(["python", "auto"]),
       dtype=st.sampled_from([torch.float64, torch.float32]))
def test_all_steps_at_once_give_actings_outputs(monkeypatch, windowed_from, options, seed, steps, batch, reset, carried, step, dtype):
    """Every configuration, episode starts inside the call and in the carried memory, a state of
    the fast core (its buffers) and of the reference, attending over windows or the full matrix:
    the same outputs as stepping."""
    monkeypatch.setattr(cached, "WINDOWED_FROM", windowed_from)
    core = build({**options, "dropout": 0.0, "keep_slot": False, "step": step}, seed, dtype).eval()
    generator = torch.Generator().manual_seed(seed + 1)
    x0 = torch.randn(carried, batch, INPUT_DIM, generator=generator, dtype=dtype)
    x = torch.randn(steps, batch, INPUT_DIM, generator=generator, dtype=dtype)
    first = torch.rand(steps, batch, generator=generator) < reset
    tolerance = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else close32(terms=16 * (options["n_layers"] + steps))
    for model in (core, reference_of(core)):
        start, y, memory = acted(model, x0, x, first)
        with torch.no_grad():
            torch.testing.assert_close(cached_forward(model, x, start, first, memory), y, **tolerance)


def test_no_gradient_reaches_the_memory_and_every_weight_gets_one():
    """The memory is read, held fixed: its gradient is none; every weight on a step's path and the
    key and value projections of its window get one (layer_logits, which only mix what is written, do not)."""
    options = dict(n_heads=2, d_model=8, n_layers=2, span=3, pre_norm=True, persistent=0, shared_kv=False,
                   read_norm=True, dropout=0.0, value_init="pytorch")
    core = build(options, seed=3)
    x = torch.randn(5, 2, INPUT_DIM, dtype=torch.float64)
    first = torch.zeros(5, 2, dtype=torch.bool)
    start, _, memory = acted(core, x[:2], x, first)
    memory = memory.clone().requires_grad_()
    cached_forward(core, x, start, first, memory).square().sum().backward()
    assert memory.grad is None
    unreached = sorted(name for name, p in core.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0)
    assert unreached == ["layer_logits"]


@pytest.mark.parametrize("episode_start", [1, 3])
def test_a_step_reads_its_window_of_its_own_episode_only(episode_start):
    """Changing m_t changes the outputs of steps t + 1 .. t + S of its episode and of no other step."""
    options = dict(n_heads=1, d_model=4, n_layers=1, span=2, pre_norm=True, persistent=0, shared_kv=True,
                   read_norm=True, dropout=0.0, value_init="pytorch")
    core = build(options, seed=5).eval()
    x = torch.randn(6, 1, INPUT_DIM, dtype=torch.float64)
    first = torch.zeros(6, 1, dtype=torch.bool)
    first[episode_start] = True
    start, _, memory = acted(core, x[:3], x, first)
    changed_at = episode_start - 1 if episode_start == 3 else 1
    moved = memory.clone()
    moved[changed_at] += torch.randn(moved.shape[1:], dtype=moved.dtype, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        difference = (cached_forward(core, x, start, first, moved) - cached_forward(core, x, start, first, memory)).abs().sum(-1)[:, 0]
    reads = [t for t in range(6) if changed_at < t <= changed_at + 2 and (t < episode_start) == (changed_at < episode_start)]
    assert [t for t in range(6) if difference[t] > 0] == reads
