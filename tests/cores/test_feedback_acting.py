"""The Feedback core's acting calls in one call of the compiled step (FeedbackCore._act): taken
by every acting call whose state's keys are current, equal to the run it replaces (FeedbackRun, itself tested against the
reference in test_feedback_paths.py) bit for bit, outputs and state, across the buffers' refills,
episode starts and calls of several steps; and never taken where it would be wrong (weights
changed since the state's keys were made, dropout on)."""

import pytest
import torch

from agents.cores import make_core
from agents.cores.append_log import HEADROOM
from agents.cores.feedback import compiled as feedback_compiled
from agents.cores.feedback.core import FeedbackCore

INPUT_DIM, BATCH, SPAN = 5, 3, 4


@pytest.fixture
def act_calls(monkeypatch):
    """How many times the compiled step's act_steps ran (the counter's one entry)."""
    extension = feedback_compiled.extension()
    assert extension is not None, "the compiled Feedback step did not build"
    count, act_steps = [0], extension.act_steps

    def counted(**arguments):
        count[0] += 1
        return act_steps(**arguments)

    monkeypatch.setattr(extension, "act_steps", counted)
    return count


def core_of(options: dict, dtype: torch.dtype, seed: int = 0) -> FeedbackCore:
    torch.manual_seed(seed)
    core = make_core("feedback", INPUT_DIM, d_model=8, n_heads=2, span=SPAN, **options).to(dtype).eval()
    with torch.no_grad():
        for p in core.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return core


def act(core, steps: list[int], dtype: torch.dtype, change_weights_at: int | None = None) -> list:
    """Acting calls of `steps` steps each, from an empty state, episodes starting at random ->
    each call's outputs and the state's last span (memory, keys, values, valid, end)."""
    generator = torch.Generator().manual_seed(1)
    state, seen = core.initial_state(BATCH, "cpu"), []
    with torch.no_grad():
        for call, n in enumerate(steps):
            if call == change_weights_at:
                core.kv[0].weight.mul_(0.9)  # an optimiser's step, say: the stored keys are stale
            x = torch.randn(n, BATCH, INPUT_DIM, generator=generator, dtype=dtype)
            y, state = core(x, state, torch.rand(n, BATCH, generator=generator) < 0.1)
            window = slice(state.end - SPAN, state.end)
            seen.append((y, state.memory[:, window], state.keys[..., window], state.values[..., window], state.valid, state.end))
    return seen


def assert_identical(fast: list, run: list) -> None:
    for call, (a, b) in enumerate(zip(fast, run, strict=True)):
        for name, x, y in zip(("y", "memory", "keys", "values", "valid", "end"), a, b):
            assert (x == y) if name == "end" else torch.equal(x, y), f"call {call}: {name} differs"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("options", [dict(), dict(pre_norm=False, shared_kv=False), dict(n_layers=3, read_norm=False),
                                     dict(memory_write="tanh", read_norm=False, value_init="orthogonal")])
def test_acting_in_one_call_equals_the_run_it_replaces(monkeypatch, act_calls, options, dtype):
    steps = [1] * (2 * HEADROOM + 10) + [2, 3, 1, 5]  # past two refills of the buffers, then calls of several steps
    fast = act(core_of(options, dtype), steps, dtype)
    taken = act_calls[0]
    monkeypatch.setattr(FeedbackCore, "_act", lambda *arguments: None)
    run = act(core_of(options, dtype), steps, dtype)
    assert_identical(fast, run)
    # every call but the first (an empty state has no keys of these weights), the buffers' refills included
    assert taken == len(steps) - 1, f"{taken} of {len(steps)} calls took the one-call path"


def test_weights_changed_since_the_keys_were_made_take_the_run(monkeypatch, act_calls):
    """After an in-place change of a weight the state's keys are stale: the next call recomputes
    them (FeedbackRun), and the ones after it take the one-call path again, all equal to the run."""
    steps = [1] * 20
    fast = act(core_of({}, torch.float32), steps, torch.float32, change_weights_at=10)
    taken = act_calls[0]
    monkeypatch.setattr(FeedbackCore, "_act", lambda *arguments: None)
    assert_identical(fast, act(core_of({}, torch.float32), steps, torch.float32, change_weights_at=10))
    assert taken == len(steps) - 2  # not the first call, nor the one after the change


def test_dropout_in_train_mode_takes_the_run(act_calls):
    """Acting in train mode with dropout draws masks: the one-call path (which has none) is not taken."""
    core = core_of(dict(dropout=0.3), torch.float32).train()
    act(core, [1] * 5, torch.float32)
    assert act_calls[0] == 0
    act(core.eval(), [1] * 5, torch.float32)
    assert act_calls[0] == 4


def test_acting_calls_reuse_the_weights_they_prepared():
    """The derived weights and their compiled structs are made once while the weights stay the
    same (building them again each call was most of an acting call's Python)."""
    core = core_of({}, torch.float32)
    act(core, [1] * 3, torch.float32)
    prepared = core.__dict__["_compiled_weights"]
    act(core, [1] * 3, torch.float32)
    assert core.__dict__["_compiled_weights"] is prepared
