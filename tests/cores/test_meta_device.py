"""Every core on the meta device, a stand-in for CUDA that needs no GPU.

A meta tensor has a shape and a dtype but no data. So on `torch.device("meta")` a tensor made on
the CPU by mistake meets a meta one and raises ("Tensor on device cpu is not on the expected
device meta"), and so does every operation whose result depends on the data, which on CUDA is a
host synchronisation: `.item()`, `.tolist()`, `.cpu()`, `nonzero`, boolean-mask indexing, an
`if` on a tensor. A core that runs here end to end (forward, backward, an optimiser step,
acting a step at a time) makes no stray host tensor and reads nothing back on CUDA either.

What cannot run here, on purpose: an LSTM or GRU call over T > 1 steps finds the steps where
some env resets with `nonzero` (one read-back per learning call, the price of the torch RNN's
fused pass, which cannot reset part of the batch mid-sequence: agents/cores/recurrent.py). The
test below pins exactly that, so the sync cannot spread to acting unnoticed.
"""

import pytest
import torch

from agents.cores import make_core
from agents.cores.feedback.reference import reference_of

META = torch.device("meta")
INPUT_DIM, BATCH, STEPS = 5, 3, 4
ATTENTION = dict(d_model=8, n_heads=2, n_layers=2, span=3)
CORES = {
    "feedback": ("feedback", ATTENTION),
    "feedback-dropout": ("feedback", {**ATTENTION, "dropout": 0.1}),
    "feedback-per-layer-kv-post-norm": ("feedback", {**ATTENTION, "shared_kv": False, "pre_norm": False}),
    "feedback-persistent": ("feedback", {**ATTENTION, "persistent": 2}),
    "feedback-keeping": ("feedback", {**ATTENTION, "carry": "gate", "keep_slot": True, "memory_write": "tanh", "dropout": 0.1}),
    "transformer": ("transformer", ATTENTION),
    "transformer-persistent-dropout": ("transformer", {**ATTENTION, "persistent": 2, "dropout": 0.1}),
    "transformer-gtrxl": ("transformer", {**ATTENTION, "gating": "gru"}),
    "transformer-gtrxl-persistent-dropout": ("transformer", {**ATTENTION, "gating": "gru", "persistent": 2, "dropout": 0.1}),
    "reservoir-ffn": ("reservoir", ATTENTION),
    "reservoir-transformer-backskip": ("reservoir", {**ATTENTION, "kind": "transformer", "backskip": True}),
    "reservoir-esn": ("reservoir", {"kind": "esn", "units": 8, "d_model": 8}),
    "lstm": ("lstm", {"hidden_size": 8, "n_layers": 2}),
    "gru": ("gru", {"hidden_size": 8, "n_layers": 2}),
    "mlp": ("mlp", {"hidden_size": 8}),
    "ffm": ("ffm", {"d_model": 8, "memory_size": 4, "context_size": 2}),
    "lru": ("lru", {"d_model": 8, "state_size": 6, "n_layers": 2}),
    "mamba": ("mamba", {"d_model": 8, "d_state": 4, "n_layers": 2}),
}
RECURRENT = ("lstm", "gru")
LEARNS_OVER_CHUNKS = [name for name, (core, _) in CORES.items() if core not in RECURRENT]
# cores with a step-at-a-time run (core.open); the Feedback core's ways of keeping the cue run on its
# reference model, which has none (the policy then recomputes the rollout's steps)
OPENS = [name for name, (core, _) in CORES.items() if core in ("feedback", *RECURRENT) and name != "feedback-keeping"]


def meta_core(name: str) -> torch.nn.Module:
    core, options = CORES[name]
    torch.manual_seed(0)
    return make_core(core, INPUT_DIM, **options).to(META).train()


def inputs(steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x (T, B, I) with gradients and first (T, B). (Meta tensors hold no values, so there are
    no resets to place: a code path that depended on where they are would raise.)"""
    first = torch.zeros(steps, BATCH, dtype=torch.bool, device=META)
    return torch.randn(steps, BATCH, INPUT_DIM, device=META, requires_grad=True), first


def assert_meta(*tensors: torch.Tensor) -> None:
    for tensor in tensors:
        assert tensor.device == META, f"a result left the meta device: {tensor.device}"


def learn_and_act(core: torch.nn.Module, steps: int) -> None:
    """One learning call from the initial state (forward, backward, Adam step), then three
    acting calls of one step without gradients, each from the state before (the cached path of
    the attention cores: reuse, then extend in place)."""
    optimizer = torch.optim.Adam([p for p in core.parameters() if p.requires_grad])
    state = core.initial_state(BATCH, META)
    x, first = inputs(steps)
    y, state = core(x, state, first)
    assert_meta(y)
    assert y.shape == (steps, BATCH, core.output_dim)
    y.square().sum().backward()
    assert_meta(x.grad, *(p.grad for p in core.parameters() if p.requires_grad))
    optimizer.step()
    with torch.no_grad():
        for _ in range(3):
            x, first = inputs(1)
            y, state = core(x, state, first)
            assert_meta(y)


@pytest.mark.parametrize("name", LEARNS_OVER_CHUNKS)
def test_a_learning_call_its_optimiser_step_and_acting_run_on_meta(name):
    learn_and_act(meta_core(name), STEPS)


def test_the_feedback_reference_model_learns_and_acts_on_meta():
    learn_and_act(reference_of(meta_core("feedback")), STEPS)


@pytest.mark.parametrize("name", RECURRENT)
def test_a_recurrent_core_learns_and_acts_on_meta_a_step_a_call(name):
    learn_and_act(meta_core(name), 1)


@pytest.mark.parametrize("name", RECURRENT)
def test_a_recurrent_learning_call_reads_its_resets_back_to_the_host(name):
    """The one sync left in the cores, and only in calls of T > 1 steps (see the module docstring)."""
    core = meta_core(name)
    x, first = inputs(STEPS)
    with pytest.raises(NotImplementedError, match="nonzero"):
        core(x, core.initial_state(BATCH, META), first)


@pytest.mark.parametrize("name", OPENS)
def test_a_call_fed_a_step_at_a_time_runs_on_meta(name):
    """Acting with the graph kept (Policy.open): steps with gradients on, then all outputs,
    their backward, an optimiser step, and the state after them."""
    core = meta_core(name)
    optimizer = torch.optim.Adam(core.parameters())
    run = core.open(core.initial_state(BATCH, META), STEPS)
    xs = []
    for _ in range(STEPS):
        x, first = inputs(1)
        xs.append(x)
        assert_meta(run.step(x[0], first[0]))
    y = run.outputs()
    assert_meta(y)
    y.square().sum().backward()
    assert_meta(*(x.grad for x in xs), *(p.grad for p in core.parameters()))
    optimizer.step()
    state = run.finish()
    assert_meta(*(value for value in state if isinstance(value, torch.Tensor)))
