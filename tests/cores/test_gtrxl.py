"""GTrXL, the Transformer core's `gating="gru"` (agents/cores/gtrxl.py): the gate against the
paper's equations written out here (Parisotto et al. 2020, section 3), the gated core against the
naive step-by-step Transformer (benchmarks/naive_cores.py, whose layer writes the GTrXL layer
out) over shapes, chunk sizes and episode starts in float64, outputs and gradients; a fresh
block near the identity; the option refused where it cannot run; A2C and PPO train, resume and
evaluate with it. (The interface tests draw gated cores too: test_interface.py, test_meta_device.py,
test_bf16.py.)"""

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import evaluate
import train_a2c
import train_ppo
from agents.config.config_cli import parse_core_options
from agents.cores import make_core
from agents.cores.gtrxl import GatedAttentionBlock, GRUGate
from agents.runtime.checkpoint import load_checkpoint
from benchmarks.naive_cores import NaiveTransformer, gru_gate
from experiments import memory_length

INPUT_DIM = 5
TOL = dict(atol=1e-10, rtol=1e-10)  # float64


def paper_gate(x, y, gate):
    """g(x, y) as the paper writes it, one matrix at a time: (..., D) -> (..., D)."""
    d = x.shape[-1]
    w_r, w_z, w_g = gate.w.weight.split(d)  # each (D, D): the rows of W_r, W_z, W_g in that order
    u_r, u_z = gate.u.weight.split(d)
    u_g, b_g = gate.u_g.weight, gate.bias
    mat = lambda m, v: torch.einsum("ij,...j->...i", m, v)  # noqa: E731  (M v for each leading index)
    r = torch.sigmoid(mat(w_r, y) + mat(u_r, x))
    z = torch.sigmoid(mat(w_z, y) + mat(u_z, x) - b_g)
    h_hat = torch.tanh(mat(w_g, y) + mat(u_g, r * x))
    return (1 - z) * x + z * h_hat


def randomised(module, scale=0.3):
    """Every trainable weight moved off its initial value (b_g off 2, LayerNorms off 1 and 0)."""
    with torch.no_grad():
        for p in module.parameters():
            if p.requires_grad:
                p.add_(scale * torch.randn_like(p))
    return module


@settings(derandomize=True, max_examples=30, deadline=None)
@given(width=st.integers(1, 9), lead=st.lists(st.integers(1, 4), min_size=1, max_size=3), gate_bias=st.sampled_from([2.0, 0.0, -1.5]),
       seed=st.integers(0, 2**16))
def test_the_gate_is_the_papers_equations_outputs_and_gradients(width, lead, gate_bias, seed):
    torch.manual_seed(seed)
    gate = randomised(GRUGate(width, gate_bias).double(), 0.0)
    assert torch.equal(gate.bias, torch.full((width,), gate_bias, dtype=torch.float64))  # b_g starts at gate_bias
    randomised(gate)
    x = torch.randn(*lead, width, dtype=torch.float64, requires_grad=True)
    y = torch.randn(*lead, width, dtype=torch.float64).relu().requires_grad_()
    got, want = gate(x, y), paper_gate(x, y, gate)
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(gru_gate(gate, x, y), want, **TOL)  # the naive reference's gate, too
    r = torch.randn_like(want)
    inputs = [x, y, *gate.parameters()]
    for g, w in zip(torch.autograd.grad((got * r).sum(), inputs), torch.autograd.grad((want * r).sum(), inputs)):
        torch.testing.assert_close(g, w, **TOL)


@st.composite
def gated_cases(draw):
    """A gated Transformer in float64 (weights moved off their start), x (T, B, I), first (T, B)
    and cuts splitting the T steps into calls."""
    heads = draw(st.integers(1, 3))
    options = dict(n_heads=heads, d_model=heads * draw(st.sampled_from([2, 4])), n_layers=draw(st.integers(1, 3)),
                   span=draw(st.integers(1, 5)), persistent=draw(st.sampled_from([0, 0, 2])), gating="gru",
                   gate_bias=draw(st.sampled_from([2.0, 0.5])))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    core = randomised(make_core("transformer", INPUT_DIM, **options).double().eval())
    steps, batch = draw(st.integers(1, 14)), draw(st.integers(1, 3))
    x = torch.randn(steps, batch, INPUT_DIM, dtype=torch.float64)
    first = torch.rand(steps, batch) < draw(st.sampled_from([0.0, 0.2, 0.5]))
    cuts = sorted(draw(st.sets(st.integers(1, steps - 1), max_size=3))) if steps > 1 else []
    return core, x, first, cuts


def chunked(model, x, first, cuts, state):
    """Outputs of `model` over the calls [0, cuts[0]), [cuts[0], cuts[1]), ..., the state carried."""
    outputs = []
    for a, b in zip([0, *cuts], [*cuts, x.shape[0]]):
        y, state = model(x[a:b], state, first[a:b])
        outputs.append(y)
    return torch.cat(outputs)


def assert_matches_naive(core, x, first, cuts):
    """Outputs, and the gradients of sum(y r) at x and every weight, equal the naive stepper's
    over the same calls (each call's state handed on detached, so each call's gradients stop at
    its start in both)."""
    naive = NaiveTransformer(core)
    x = x.detach().requires_grad_()
    got = chunked(core, x, first, cuts, core.initial_state(x.shape[1], "cpu"))
    want = chunked(naive, x, first, cuts, naive.initial_state(x.shape[1], "cpu"))
    torch.testing.assert_close(got, want, **TOL)
    r = torch.randn_like(want)
    inputs = [x, *core.parameters()]
    for g, w in zip(torch.autograd.grad((got * r).sum(), inputs, allow_unused=True), torch.autograd.grad((want * r).sum(), inputs, allow_unused=True)):
        assert (g is None) == (w is None)
        if g is not None:
            torch.testing.assert_close(g, w, **TOL)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(case=gated_cases())
def test_the_gated_core_equals_the_gtrxl_layer_stepped_by_hand(case):
    """Over shapes, chunk sizes and episode starts, in float64: outputs and gradients."""
    assert_matches_naive(*case)


@settings(derandomize=True, max_examples=15, deadline=None)
@given(case=gated_cases())
def test_gated_acting_a_step_a_call_equals_the_naive_stepper(case):
    """Acting: one step a call without gradients, the stored keys reused and the buffers extended in place."""
    core, x, first, _ = case
    naive = NaiveTransformer(core)
    with torch.no_grad():
        got = chunked(core, x, first, list(range(1, x.shape[0])), core.initial_state(x.shape[1], "cpu"))
        want = chunked(naive, x, first, [], naive.initial_state(x.shape[1], "cpu"))
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("span, steps", [(2, 40), (12, 75)])
def test_long_gated_calls_windowed_or_by_query_chunks_equal_the_naive_stepper(span, steps):
    """span 2, T 40: each query over its own window (transformer.WINDOWED_FROM); span 12, T 75:
    the full matrix in chunks of queries (QUERY_CHUNK)."""
    torch.manual_seed(span)
    core = randomised(make_core("transformer", INPUT_DIM, d_model=8, n_heads=2, n_layers=2, span=span, gating="gru").double().eval())
    x = torch.randn(steps, 2, INPUT_DIM, dtype=torch.float64)
    first = torch.rand(steps, 2) < 0.05
    assert_matches_naive(core, x, first, [3])


def test_a_fresh_gated_block_is_near_the_identity():
    """b_g = 2: each gate's z starts near sigmoid(-2) = 0.12, and a fresh block moves its input
    about a quarter as far as its size (the plain pre-norm block: about half; gates started at
    b_g = 0: three quarters)."""
    torch.manual_seed(0)
    d, heads, steps = 32, 4, 9
    h = torch.randn(16, steps, d)
    keys = torch.randn(16, heads, steps, d // heads)
    visible = torch.ones(16, steps, steps, dtype=torch.bool).tril()
    seen = []

    def record_z(gate, inputs, _):
        x, y = inputs
        seen.append(torch.sigmoid(gate.w(y).chunk(3, -1)[1] + gate.u(x).chunk(2, -1)[1] - gate.bias))

    def change(gate_bias):
        torch.manual_seed(1)
        block = GatedAttentionBlock(d, heads, steps, 4 * d, 0.0, True, 0, gate_bias)
        for gate in (block.gate_attn, block.gate_ff):
            gate.register_forward_hook(record_z)
        with torch.no_grad():
            return float((block(h, keys, keys, 0, visible) - h).norm() / h.norm())

    assert change(2.0) < 0.35
    assert len(seen) == 2 and all(0.08 < float(z.mean()) < 0.18 for z in seen), [float(z.mean()) for z in seen]
    assert change(0.0) > 0.6


@pytest.mark.parametrize("core, options, message", [
    ("transformer", {"gating": "lstm"}, r"^gating must be one of \['none', 'gru'\], got 'lstm'$"),
    ("transformer", {"gating": "gru", "pre_norm": False},
     r"^gating='gru' needs pre_norm=True \(GTrXL's identity-map reordering\), got pre_norm=False$"),
    ("transformer", {"gating": "gru", "gate_bias": 51.0}, r"^gate_bias must be in \[-50.0, 50.0\] .*, got 51.0$"),
    ("transformer", {"gating": "gru", "gate_bias": float("nan")}, r"^gate_bias must be in \[-50.0, 50.0\] .*, got nan$"),
    ("transformer", {"gating": "gru", "gate_bias": "2"}, r"^gate_bias must be in \[-50.0, 50.0\] .*, got '2'$"),
    ("feedback", {"gating": "gru"}, r"^gating must be 'none' for the Feedback core, got 'gru': its fast steps .* "
                                    r"\(--core transformer --core-opt gating=gru\)$"),
])
def test_bad_gating_is_refused_naming_the_value_and_what_is_allowed(core, options, message):
    with pytest.raises(ValueError, match=message):
        make_core(core, INPUT_DIM, d_model=8, n_heads=2, **options)


def test_the_default_is_the_residual_block_and_the_option_parses_from_the_command_line():
    plain = make_core("transformer", INPUT_DIM, d_model=8, n_heads=2)
    assert not any("gate" in name for name, _ in plain.named_parameters())
    assert parse_core_options("transformer", ["gating=gru,gate_bias=1"]) == {"gating": "gru", "gate_bias": 1.0}
    gated = make_core("transformer", INPUT_DIM, d_model=8, n_heads=2, n_layers=2, gating="gru")
    assert all(isinstance(block, GatedAttentionBlock) for block in gated.blocks)
    reservoir = make_core("reservoir", INPUT_DIM, d_model=8, n_heads=2, n_layers=2, kind="transformer", gating="gru")
    assert all(isinstance(block, GatedAttentionBlock) for block in reservoir.blocks)  # a frozen layer's gates included


GATED = ["--core", "transformer", "--core-opt", "d_model=16,n_layers=2,n_heads=2,span=4,gating=gru"]
SMALL = ["--env", "corridor", "--env-opt", "length=3,max_episode_steps=7", "--num-envs", "4", "--rollout", "8", "--threads", "1", "--seed", "2"]


@pytest.mark.parametrize("trainer, extra", [(train_a2c, []), (train_ppo, ["--num-minibatches", "2", "--update-epochs", "2"])])
def test_a2c_and_ppo_train_resume_and_evaluate_a_gated_transformer(trainer, extra, tmp_path, capsys):
    kind = "a2c" if trainer is train_a2c else "ppo"
    trainer.main([*GATED, *SMALL, *extra, "--total-steps", "64", "--run-dir", str(tmp_path)])
    trainer.main(["--resume", str(tmp_path), "--total-steps", "96"])
    payload = load_checkpoint(tmp_path, kind)
    assert payload["counters"]["updates"] == 3
    assert payload["config"]["core_options"]["gating"] == "gru"
    gate_biases = [value for name, value in payload["policy"].items() if name.endswith("gate_attn.bias")]
    assert len(gate_biases) == 2 and all(not torch.equal(b, torch.full_like(b, 2.0)) for b in gate_biases)  # trained
    capsys.readouterr()
    evaluate.main([str(tmp_path), "--episodes", "2", "--greedy"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["global_step"] == 96 and {"agent", "random"} <= set(result["results"])


def test_the_recall_sweep_runs_a_gtrxl_row_on_request_only():
    assert memory_length.model_args("transformer-episode-gtrxl", "tmaze", 8, quick=False) == [
        "--core", "transformer", "--core-opt", "span=9,n_layers=2,gating=gru"]
    assert "transformer-episode-gtrxl" not in memory_length.make_parser().parse_args([]).models
