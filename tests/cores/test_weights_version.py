"""Acting (no gradients) reuses the keys and values carried in a Feedback or Transformer state
only while the weights that made them are unchanged: after an optimiser step (fused ones
included), a load_state_dict, an in-place edit under no_grad, a write through `p.data` or a
conversion (module.double()), none of them marked, an acting call equals a call with gradients, which always recomputes them from the
carried memory."""

import ast
import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from agents.cores import make_core
import agents.cores.weights_version as version_module
from agents.cores.weights_version import mark_weights_changed, weights_version

INPUT_DIM = 5
CACHING = ["feedback", "transformer"]
ROOT = Path(__file__).parents[2]


def core_and_state(name: str, seed: int = 0):
    """A core and a state carried by acting, with inputs (T, B, I) and first (T, B) to go on with."""
    torch.manual_seed(seed)
    core = make_core(name, INPUT_DIM, d_model=8, n_heads=2, span=4).eval()
    x, first = torch.randn(6, 2, INPUT_DIM), torch.zeros(6, 2, dtype=torch.bool)
    with torch.no_grad():
        _, state = core(x[:3], core.initial_state(2, "cpu"), first[:3])
    return core, state, x[3:], first[3:]


def acting(core, state, x, first) -> torch.Tensor:
    with torch.no_grad():
        return core(x, state, first)[0]


def assert_acting_is_current(core, state, x, first, before: torch.Tensor) -> None:
    """Acting from `state` equals recomputing, and the weights did change what comes out."""
    recomputed = core(x, state, first)[0].detach()
    assert (recomputed - before).abs().max() > 1e-3, "the weights hardly changed: the check would prove nothing"
    torch.testing.assert_close(acting(core, state, x, first), recomputed, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", CACHING)
def test_unchanged_weights_keep_extending_the_state_in_place(name):
    """The fast path stays on: with the weights as they were, acting reuses the stored keys."""
    core, state, x, first = core_and_state(name)
    with torch.no_grad():
        _, after = core(x[:1], state, first[:1])
    assert after.keys.data_ptr() == state.keys.data_ptr() and after.version == state.version


@pytest.mark.parametrize("name", CACHING)
@pytest.mark.parametrize("fused", [False, True])
def test_an_optimiser_step_makes_acting_recompute(name, fused):
    """A fused Adam updates the weights without bumping their tensor version counters."""
    core, state, x, first = core_and_state(name)
    before = acting(core, state, x, first)
    optimizer = torch.optim.Adam(core.parameters(), lr=0.05, fused=fused)
    core(x, state, first)[0].square().sum().backward()
    optimizer.step()
    assert_acting_is_current(core, state, x, first, before)


@pytest.mark.parametrize("name", CACHING)
@pytest.mark.parametrize("assign", [False, True])
def test_load_state_dict_makes_acting_recompute(name, assign):
    """Loaded through an enclosing module, as a policy loads its core; assign=True replaces the
    parameter objects themselves."""
    core, state, x, first = core_and_state(name)
    before = acting(core, state, x, first)
    other, _, _, _ = core_and_state(name, seed=1)
    nn.ModuleDict({"core": core}).load_state_dict({f"core.{k}": v for k, v in other.state_dict().items()}, assign=assign)
    assert_acting_is_current(core, state, x, first, before)


@pytest.mark.parametrize("name", CACHING)
@pytest.mark.parametrize("edit", ["data", "in_place"])
def test_a_marked_manual_edit_makes_acting_recompute(name, edit):
    core, state, x, first = core_and_state(name)
    before = acting(core, state, x, first)
    for p in core.parameters():
        if edit == "data":
            p.data = p.data * 1.5
        else:
            with torch.no_grad():
                p.mul_(1.5)
    mark_weights_changed(core)
    assert_acting_is_current(core, state, x, first, before)


@pytest.mark.parametrize("name", CACHING)
@pytest.mark.parametrize("edit", ["add_", "copy_", "polyak", "init"])
def test_an_unmarked_in_place_edit_makes_acting_recompute(name, edit):
    """In-place edits bump the tensors' version counters, which the weights version includes:
    nobody has to call mark_weights_changed for them."""
    core, state, x, first = core_and_state(name)
    before = acting(core, state, x, first)
    target, _, _, _ = core_and_state(name, seed=1)
    with torch.no_grad():
        for p, q in zip(core.parameters(), target.parameters()):
            if edit == "add_":
                p.add_(0.5 * torch.randn_like(p))
            elif edit == "copy_":
                p.copy_(q)
            elif edit == "polyak":  # as a target network follows its online network
                p.mul_(0.5).add_(q, alpha=0.5)
            elif p.dim() >= 2:
                nn.init.orthogonal_(p)
    assert_acting_is_current(core, state, x, first, before)


@pytest.mark.parametrize("name", CACHING)
@pytest.mark.parametrize("edit", ["data =", "data.copy_", "data.mul_"])
def test_an_unmarked_write_through_data_makes_acting_recompute(name, edit):
    """`p.data` is a tensor with its own version counter: these writes leave p._version as it
    was, and the weights version sees them through TrackedParameter, unmarked."""
    core, state, x, first = core_and_state(name)
    before = acting(core, state, x, first)
    target, _, _, _ = core_and_state(name, seed=1)
    for p, q in zip(core.parameters(), target.parameters()):
        counter = p._version
        if edit == "data =":
            p.data = q.detach().clone()
        elif edit == "data.copy_":
            p.data.copy_(q)
        else:
            p.data.mul_(1.5)
        assert p._version == counter  # what the version counter alone would miss
    assert_acting_is_current(core, state, x, first, before)


@pytest.mark.parametrize("name", CACHING)
def test_converting_the_core_makes_acting_recompute(name):
    """module.double() (as .half(), .to(dtype)) sets each parameter's data in place: acting in
    the new dtype equals recomputing in it to float64's precision: reused, the stored keys would
    bring float32's rounding (about 1e-7) in."""
    core, state, x, first = core_and_state(name)
    core.double()
    x = x.double()
    with torch.no_grad():
        acted = core(x, state, first)[0]
    recomputed = core(x, state, first)[0].detach()
    torch.testing.assert_close(acted, recomputed, atol=1e-12, rtol=0)
    assert acted.dtype == torch.float64


def tags_of_a_fresh_process() -> list[tuple[str, int]]:
    """The weights tags of a feedback core built first thing in a new Python process."""
    script = ("from agents.cores import make_core; from agents.cores.weights_version import weights_version; "
              "print(repr([tag for tag, _ in weights_version(make_core('feedback', 5))]))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    return ast.literal_eval(run.stdout.strip())


def test_versions_never_match_another_process(monkeypatch):
    """A state restored from a checkpoint another process wrote is never taken as current, even
    for the same weights built the same way at the same point of the process: two fresh processes
    hand out the same counters, so only the per-process token tells their tags apart (a constant
    token would pass a comparison with this process, whose counter earlier tests have advanced)."""
    first, second = tags_of_a_fresh_process(), tags_of_a_fresh_process()
    assert [n for _, n in first] == [n for _, n in second]
    assert {token for token, _ in first}.isdisjoint(token for token, _ in second)
    monkeypatch.setattr(version_module, "_counter", itertools.count(first[0][1]))  # this process, at the same counters
    ours = [tag for tag, _ in weights_version(make_core("feedback", 5))]
    assert [n for _, n in ours] == [n for _, n in first] and not set(ours) & set(first)
    assert weights_version(make_core("feedback", 5)) != weights_version(make_core("feedback", 5))  # nor one core's another's
