"""Reservoir cores: placement, frozen orthogonal layers that training never changes, gradients
through (or, with backskip, around) them, and the echo-state network against its recurrence."""

import pytest
import torch

from agents.cores import make_core
from agents.cores.esn import EchoStateCore
from agents.cores.reservoir import ReservoirConfig, ReservoirCore, WithReservoirAbove, placement

INPUT_DIM = 5
SMALL = {"d_model": 8, "n_heads": 2, "span": 4}


def reservoir_layers(core):
    """The reservoir layers of a ReservoirCore, bottom to top."""
    if core.config.kind == "ffn":
        return [block.reservoir for block in core.blocks if isinstance(block, WithReservoirAbove)]
    return [block for block, role in zip(core.blocks, core.layout) if role == "reservoir"]


def inputs(steps=6, batch=2):
    first = torch.zeros(steps, batch, dtype=torch.bool)
    first[0] = True
    return torch.randn(steps, batch, INPUT_DIM), first


def last_step_loss(core, x, first):
    y, _ = core(x, core.initial_state(x.shape[1], "cpu"), first)
    return (y[-1] * torch.linspace(-1, 1, y.shape[-1])).sum()


@pytest.mark.parametrize(
    "trained, reservoirs, layout",
    [(1, 1, "TR"), (2, 1, "TRT"), (3, 1, "TTRT"), (4, 1, "TTRTT"), (2, 2, "TRTR"), (4, 2, "TTRTRT"), (5, 3, "TTRTRTRT")],
)
def test_placement_alternates_in_the_middle(trained, reservoirs, layout):
    names = {"T": "trained", "R": "reservoir"}
    assert placement(trained, reservoirs) == [names[letter] for letter in layout]


@pytest.mark.parametrize("kind", ["ffn", "transformer"])
def test_core_builds_its_layout(kind):
    core = make_core("reservoir", INPUT_DIM, kind=kind, n_layers=4, n_reservoir=2, **SMALL)
    assert isinstance(core, ReservoirCore) and core.layout == placement(4, 2)
    assert len(reservoir_layers(core)) == 2
    attention_layers = 6 if kind == "transformer" else 4  # an ffn reservoir has no cache slot
    assert len(core.blocks) == len(core.kv) == attention_layers
    assert core.initial_state(3, "cpu").inputs.shape[:2] == (3, attention_layers)  # a cache slot per attention layer
    frozen = {id(p) for layer in reservoir_layers(core) for p in layer.parameters()}
    if kind == "transformer":  # the reservoir's key/value projection is frozen with it
        frozen |= {id(p) for i in (2, 4) for p in core.kv[i].parameters()}
    assert frozen == {id(p) for p in core.parameters() if not p.requires_grad}


@pytest.mark.parametrize("kind", ["ffn", "transformer"])
def test_frozen_weights_are_orthogonal(kind):
    core = make_core("reservoir", INPUT_DIM, kind=kind, **SMALL)
    linears = [m for m in core.modules() if isinstance(m, torch.nn.Linear) and not m.weight.requires_grad]
    assert len(linears) == (5 if kind == "transformer" else 2)  # query, out, fc1, fc2 (+ kv)
    for linear in linears:
        w = linear.weight
        gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        torch.testing.assert_close(gram, torch.eye(gram.shape[0]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["ffn", "transformer"])
@pytest.mark.parametrize("backskip", [False, True])
def test_training_changes_trained_layers_only(kind, backskip):
    torch.manual_seed(0)
    core = make_core("reservoir", INPUT_DIM, kind=kind, backskip=backskip, n_layers=2, n_reservoir=2, **SMALL)
    before = {name: p.detach().clone() for name, p in core.named_parameters()}
    optimizer = torch.optim.Adam(core.parameters(), lr=1e-2)
    x, first = inputs()
    target = torch.randn(6, 2, 8)
    for _ in range(3):
        y, _ = core(x, core.initial_state(2, "cpu"), first)
        optimizer.zero_grad()
        ((y - target) ** 2).mean().backward()
        optimizer.step()
    for name, p in core.named_parameters():
        assert p.requires_grad != torch.equal(p, before[name]), f"{name} (trained: {p.requires_grad})"
        if not p.requires_grad:
            assert p.grad is None, f"frozen {name} got a gradient"


@pytest.mark.parametrize("kind", ["ffn", "transformer"])
def test_gradient_goes_through_reservoirs_or_skips_them(kind):
    """Without backskip the gradient at a reservoir's input is its Jacobian applied to the
    gradient at its output; with backskip the two are the same tensor's worth."""
    grads = {}
    for backskip in (False, True):
        torch.manual_seed(0)
        core = make_core("reservoir", INPUT_DIM, kind=kind, backskip=backskip, **SMALL)
        layer = reservoir_layers(core)[0]
        seen = {}

        def capture(module, args, output):
            args[0].register_hook(lambda g: seen.setdefault("input", g))
            output.register_hook(lambda g: seen.setdefault("output", g))

        layer.register_forward_hook(capture)
        torch.manual_seed(1)
        last_step_loss(core, *inputs()).backward()
        if backskip:
            torch.testing.assert_close(seen["input"], seen["output"], atol=0, rtol=0)
        else:
            assert seen["input"].abs().sum() > 0 and not torch.allclose(seen["input"], seen["output"])
        grads[backskip] = core.embed.weight.grad
    assert grads[False].abs().sum() > 0 and grads[True].abs().sum() > 0
    assert not torch.allclose(grads[False], grads[True])


@pytest.mark.parametrize("kind", ["ffn", "transformer"])
def test_backskip_changes_the_backward_pass_only(kind):
    outputs = []
    for backskip in (False, True):
        torch.manual_seed(0)
        core = make_core("reservoir", INPUT_DIM, kind=kind, backskip=backskip, **SMALL)
        torch.manual_seed(1)
        x, first = inputs()
        outputs.append(core(x, core.initial_state(2, "cpu"), first)[0])
    torch.testing.assert_close(outputs[1], outputs[0], atol=1e-5, rtol=0)


def esn_reference(core, x, first):
    """h_t = (1 - a) h_{t-1} + a tanh(W_in x_t + W h_{t-1} + b) per env and step, h zeroed at a first."""
    a = core.config.leak_rate
    steps, batch, _ = x.shape
    outputs = torch.zeros(steps, batch, core.output_dim)
    for b in range(batch):
        h = torch.zeros(core.config.units)
        for t in range(steps):
            if first[t, b]:
                h = torch.zeros(core.config.units)
            h = (1 - a) * h + a * torch.tanh(core.w_in @ x[t, b] + core.w @ h + core.bias)
            outputs[t, b] = core.readout.weight @ h + core.readout.bias
    return outputs


@pytest.mark.parametrize("leak_rate", [0.3, 1.0])
def test_echo_state_matches_its_recurrence(leak_rate):
    torch.manual_seed(0)
    core = make_core("reservoir", INPUT_DIM, kind="esn", units=20, d_model=8, leak_rate=leak_rate)
    assert isinstance(core, EchoStateCore) and core.output_dim == 8
    x = torch.randn(10, 3, INPUT_DIM)
    first = torch.rand(10, 3) < 0.2
    y, state = core(x, core.initial_state(3, "cpu"), first)
    torch.testing.assert_close(y, esn_reference(core, x, first), atol=1e-5, rtol=0)
    assert state.h.shape == (3, 20) and not state.h.requires_grad


@pytest.mark.parametrize("units, density, radius", [(256, 0.1, 0.9), (30, 0.05, 1.2), (3, 0.1, 0.5)])
def test_echo_state_weights(units, density, radius):
    torch.manual_seed(0)
    core = make_core("reservoir", INPUT_DIM, kind="esn", units=units, density=density, spectral_radius=radius, input_scaling=0.5)
    actual = torch.linalg.eigvals(core.w.double()).abs().max().item()
    assert actual == pytest.approx(radius, abs=1e-4)
    nonzero = core.w != 0
    assert (nonzero.sum(dim=1) == max(1, round(density * units))).all()  # fixed in-degree, >= 1
    assert core.w_in.abs().max() <= 0.5 and core.bias.abs().max() <= 0.5
    assert [name for name, _ in core.named_parameters()] == ["readout.weight", "readout.bias"]
    assert {name for name, _ in core.named_buffers()} == {"w_in", "bias", "w"}


def test_torch_seed_decides_the_echo_state_weights():
    def weights(seed):
        torch.manual_seed(seed)
        return make_core("reservoir", INPUT_DIM, kind="esn", units=16).w

    assert torch.equal(weights(0), weights(0)) and not torch.equal(weights(0), weights(1))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"kind": "gru"}, r"kind must be one of \['ffn', 'transformer', 'esn'\], got 'gru'"),
        ({"n_layers": 2, "n_reservoir": 3}, r"n_reservoir must be <= n_layers \(2\), got 3"),
        ({"n_reservoir": 0}, "n_reservoir must be an integer >= 1, got 0"),
        ({"backskip": "yes"}, "backskip must be True or False, got 'yes'"),
        ({"units": 0}, "units must be an integer >= 1, got 0"),
        ({"spectral_radius": 0.0}, r"spectral_radius must be a finite number > 0, got 0.0"),
        ({"leak_rate": 0}, r"leak_rate must be a number in \(0, 1\], got 0"),
        ({"input_scaling": float("inf")}, "input_scaling must be a finite number > 0, got inf"),
        ({"density": 1.5}, r"density must be a number in \(0, 1\], got 1.5"),
    ],
)
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        ReservoirConfig(**options)
    with pytest.raises(ValueError, match=message):
        make_core("reservoir", INPUT_DIM, **options)
