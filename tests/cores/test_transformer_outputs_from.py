"""A learning call asked for the outputs of its last steps only (TransformerCore.forward's
outputs_from: a gradient window's history carries no loss) computes the same function: its
outputs are the full call's from that step on, the gradients of any loss over them and the state
after the call are the full call's, for the Transformer and the reservoirs built on it, windowed
or over the full matrix, in chunks of queries or whole, from any state (float64). And its top
layer attends from those steps only."""

import gymnasium as gym
import pytest
import torch
from hypothesis import given, settings, strategies as st

from agents.cores import transformer
from agents.model.policy import Policy
from agents.model.step_inputs import StepInputs
from tests.cores.test_interface import INPUT_DIM, attention_options
from tests.cores.test_transformer_skipped_work import keys_read
from tests.cores.test_transformer_windows import ALWAYS, FULL, assert_same_in_float64, core_of


def learning_call(core, x, state, first, outputs_from: int, asked: bool):
    """Outputs from step `outputs_from` on, the gradients of a fixed loss over them (every
    parameter and x) and the state after: the core asked for those steps (`asked`), or the full
    call cut after."""
    x = x.clone().requires_grad_(True)
    params = [p for p in core.parameters() if p.requires_grad]
    if asked:
        y, after = core(x, state, first, outputs_from)
    else:
        y, after = core(x, state, first)
        y = y[outputs_from:]
    weights = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y)
    found = torch.autograd.grad((y * weights).sum(), [x, *params], allow_unused=True)
    return [y.detach()], [torch.zeros_like(p) if g is None else g for p, g in zip([x, *params], found)], after


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(["transformer", "transformer", "reservoir"]), options=attention_options(feedback=False),
       kind=st.sampled_from(["ffn", "transformer"]), acted=st.integers(0, 6), steps=st.integers(2, 40),
       data=st.data(), windowed_from=st.sampled_from([FULL, ALWAYS]), query_chunk=st.sampled_from([4, 64]), seed=st.integers(0, 2**16))
def test_outputs_from_a_step_compute_what_the_full_call_cut_there_does(name, options, kind, acted, steps, data, windowed_from,
                                                                       query_chunk, seed):
    if name == "reservoir":
        options.update(kind=kind, n_reservoir=data.draw(st.integers(1, options["n_layers"])))
    core = core_of(name, options, seed % 100, torch.float64)
    outputs_from = data.draw(st.integers(0, steps - 1))
    saved = transformer.WINDOWED_FROM, transformer.QUERY_CHUNK
    transformer.WINDOWED_FROM, transformer.QUERY_CHUNK = windowed_from, query_chunk
    try:
        check_outputs_from(core, acted, steps, outputs_from, seed)
    finally:
        transformer.WINDOWED_FROM, transformer.QUERY_CHUNK = saved


def check_outputs_from(core, acted: int, steps: int, outputs_from: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    state = core.initial_state(2, "cpu")
    with torch.no_grad():  # a state with carried slots, some of an episode still running
        for _ in range(acted):
            _, state = core(torch.randn(1, 2, INPUT_DIM, generator=generator, dtype=torch.float64), state,
                            torch.rand(1, 2, generator=generator) < 0.3)
    x = torch.randn(steps, 2, INPUT_DIM, generator=generator, dtype=torch.float64)
    first = torch.rand(steps, 2, generator=generator) < 0.1
    assert_same_in_float64(learning_call(core, x, state, first, outputs_from, asked=True),
                           learning_call(core, x, state, first, outputs_from, asked=False))


def test_the_top_layer_attends_from_the_asked_steps_only(monkeypatch):
    """100 steps at span 200 from an empty memory, outputs from step 90: the first layer's
    queries in chunks of 64 as before, the top layer's 10 queries over the keys up to the last."""
    core = core_of("transformer", dict(d_model=8, n_heads=2, n_layers=2, span=200), seed=0)
    y, _ = core(torch.randn(100, 2, INPUT_DIM), core.initial_state(2, "cpu"), torch.zeros(100, 2, dtype=torch.bool), 90)
    assert y.shape == (10, 2, 8)
    assert keys_read(monkeypatch, core, 100, 90) == [(64, 64), (36, 100), (10, 100)]
    assert keys_read(monkeypatch, core, 100) == [(64, 64), (36, 100), (64, 64), (36, 100)]  # not asked: every query


@pytest.mark.parametrize("outputs_from", [-1, 5])
def test_outputs_from_outside_the_call_is_refused_by_name(outputs_from):
    core = core_of("transformer", dict(d_model=8, n_heads=2, n_layers=1, span=4), seed=0)
    with pytest.raises(ValueError, match=rf"outputs_from must be in \[0, 5\) for a call of 5 steps, got {outputs_from}"):
        core(torch.randn(5, 2, INPUT_DIM), core.initial_state(2, "cpu"), torch.zeros(5, 2, dtype=torch.bool), outputs_from)


@pytest.mark.parametrize("core", ["transformer", "lstm"])
def test_the_policy_gives_the_outputs_from_the_step_asked_whether_its_core_skips_work_or_not(core):
    """A core with skips_outputs is told (the Transformer), another's outputs are cut (the LSTM):
    either way the logits and values are the full call's from that step on."""
    torch.manual_seed(0)
    policy = Policy(gym.spaces.Box(-1.0, 1.0, (4,)), 3, core, dict(span=8) if core == "transformer" else {}).double().eval()
    steps = 12
    inputs = StepInputs(torch.randn(steps, 2, 4, dtype=torch.float64), torch.zeros(steps, 2, dtype=torch.long),
                        torch.zeros(steps, 2, dtype=torch.float64), torch.zeros(steps, 2, dtype=torch.bool))
    state = policy.initial_state(2, "cpu")
    with torch.no_grad():
        logits, values, _ = policy(inputs, state)
        cut_logits, cut_values, _ = policy(inputs, state, 7)
    torch.testing.assert_close(cut_logits, logits[7:], rtol=0, atol=1e-12)
    torch.testing.assert_close(cut_values, values[7:], rtol=0, atol=1e-12)
