"""The LSTM's and GRU's `gate_init` option: the gate biases each choice sets, per layer and per
gate (summed over bias_ih and bias_hh, the other gates at torch's default), that chrono keeps the
memory at initialisation, bad values refused by name, and the option reaching the core from
make_core and the command line."""

import math

import pytest
import torch

from agents.cores import core_options, make_core
from agents.cores.recurrent import RecurrentConfig

INPUT_DIM, HIDDEN, LAYERS = 5, 16, 3
GATES = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}  # torch's order
KEEP = {"lstm": "f", "gru": "z"}  # the gate that keeps the memory


def build(name, seed=0, **options):
    torch.manual_seed(seed)
    return make_core(name, INPUT_DIM, hidden_size=HIDDEN, n_layers=LAYERS, **options)


def gate_biases(core, layer):
    """{gate: (its rows of bias_ih, of bias_hh)} of one layer."""
    b_ih, b_hh = (getattr(core.rnn, f"{name}_l{layer}").detach() for name in ("bias_ih", "bias_hh"))
    return dict(zip(GATES[core_name(core)], zip(b_ih.split(HIDDEN), b_hh.split(HIDDEN)), strict=True))


def core_name(core):
    return "lstm" if isinstance(core.rnn, torch.nn.LSTM) else "gru"


def assert_default_elsewhere(core, default, changed):  # default: torchs(name), the same seed
    """Every weight but the biases of the `changed` gates equals the default core's (same seed)."""
    for name, weight in core.rnn.named_parameters():
        if not name.startswith("bias"):
            torch.testing.assert_close(weight, getattr(default.rnn, name), atol=0, rtol=0)
    for layer in range(LAYERS):
        ours, theirs = gate_biases(core, layer), gate_biases(default, layer)
        for gate in set(GATES[core_name(core)]) - set(changed):
            torch.testing.assert_close(ours[gate], theirs[gate], atol=0, rtol=0)


def torchs(name, seed=0):
    """The core with torch's own biases (gate_init="pytorch"), the reference the others change."""
    return build(name, seed, gate_init="pytorch")


@pytest.mark.parametrize("name, default", [("lstm", "pytorch"), ("gru", "pytorch")])
def test_the_lstm_and_the_gru_start_from_torchs_biases_by_default(name, default):
    assert core_options(name)["gate_init"] == default and core_options(name)["t_max"] == 100
    built, given = build(name), build(name, gate_init=default, t_max=100)
    assert all(torch.equal(p, q) for p, q in zip(built.parameters(), given.parameters(), strict=True))


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_pytorch_changes_nothing_torch_made(name):
    torch.manual_seed(0)
    module = (torch.nn.LSTM if name == "lstm" else torch.nn.GRU)(INPUT_DIM, HIDDEN, LAYERS)
    assert all(torch.equal(p, q) for p, q in zip(torchs(name).rnn.parameters(), module.parameters(), strict=True))


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_forget_bias_sets_the_keep_gates_bias_to_one_exactly_in_every_layer(name):
    core, keep = build(name, gate_init="forget_bias"), KEEP[name]
    for layer in range(LAYERS):
        b_ih, b_hh = gate_biases(core, layer)[keep]
        assert torch.equal(b_ih + b_hh, torch.ones(HIDDEN)) and torch.equal(b_hh, torch.zeros(HIDDEN))
    assert_default_elsewhere(core, torchs(name), changed=keep)


@pytest.mark.parametrize("name, changed", [("lstm", "fi"), ("gru", "z")])
@pytest.mark.parametrize("t_max", [2, 50, 1000])
def test_chrono_draws_the_keep_bias_in_log_1_to_log_t_max_minus_1_and_the_lstms_input_bias_opposite(name, changed, t_max):
    core = build(name, gate_init="chrono", t_max=t_max)
    for layer in range(LAYERS):
        gates = gate_biases(core, layer)
        b_keep = sum(gates[KEEP[name]])
        assert b_keep.min() >= 0.0 and b_keep.max() <= math.log(t_max - 1) + 1e-6
        if t_max > 2:
            assert b_keep.unique().numel() == HIDDEN  # drawn, one value a unit
        if name == "lstm":
            assert torch.equal(sum(gates["i"]), -b_keep)
        assert all(torch.equal(gates[gate][1], torch.zeros(HIDDEN)) for gate in changed)
    assert_default_elsewhere(core, torchs(name), changed=changed)


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_chronos_draw_follows_torch_manual_seed(name):
    biases = [build(name, seed, gate_init="chrono").rnn.bias_ih_l0 for seed in (0, 0, 1)]
    assert torch.equal(biases[0], biases[1]) and not torch.equal(biases[0], biases[2])


def keep_fraction(core, steps=20, batch=64):
    """The keep gate's mean value (LSTM: forget f, the share of the cell state kept a step; GRU:
    update z, of h) over a seeded run on random inputs, from the layer-0 equations."""
    torch.manual_seed(1)
    gate = GATES[core_name(core)].index(KEEP[core_name(core)])
    w_ih, w_hh, b_ih, b_hh = (getattr(core.rnn, f"{n}_l0").detach() for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    rows = slice(gate * HIDDEN, (gate + 1) * HIDDEN)
    state, kept = core.initial_state(batch, "cpu"), []
    with torch.no_grad():
        for _ in range(steps):
            x = torch.randn(1, batch, INPUT_DIM)
            h = state.h[:, 0]
            kept.append(torch.sigmoid(x[0] @ w_ih[rows].T + b_ih[rows] + h @ w_hh[rows].T + b_hh[rows]))
            _, state = core(x, state, torch.zeros(1, batch, dtype=torch.bool))
    return torch.stack(kept).mean().item()


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_chrono_keeps_most_of_the_memory_a_step_where_the_default_keeps_half(name):
    assert 0.4 < keep_fraction(torchs(name)) < 0.6
    assert 0.65 < keep_fraction(build(name, gate_init="forget_bias")) < 0.8  # sigmoid(1) = 0.73
    assert keep_fraction(build(name, gate_init="chrono", t_max=100)) > 0.9


def test_bad_values_are_refused_by_name():
    with pytest.raises(ValueError, match=r"gate_init must be one of \['pytorch', 'forget_bias', 'chrono'\], got 'chrno'"):
        RecurrentConfig(gate_init="chrno")
    for bad in (1, 0, 50.5, True):
        with pytest.raises(ValueError, match=f"t_max must be an integer >= 2, got {bad!r}"):
            make_core("gru", INPUT_DIM, gate_init="chrono", t_max=bad)


def test_make_core_hands_the_options_to_the_config():
    core = make_core("lstm", INPUT_DIM, hidden_size=HIDDEN, gate_init="chrono", t_max=50)
    assert (core.config.gate_init, core.config.t_max) == ("chrono", 50)
    assert sum(gate_biases(core, 0)["f"]).max() <= math.log(49) + 1e-6


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_a_checkpoint_loaded_replaces_the_initialisation(name):
    core, default = build(name, gate_init="chrono"), torchs(name, seed=3)
    core.load_state_dict(default.state_dict())
    assert all(torch.equal(p, q) for p, q in zip(core.parameters(), default.parameters(), strict=True))


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_a_chrono_core_builds_on_meta_and_runs_cast_to_bf16(name):
    with torch.device("meta"):
        assert build(name, gate_init="chrono").rnn.bias_ih_l0.is_meta
    core = build(name, gate_init="chrono")
    x, first = torch.randn(6, 2, INPUT_DIM), torch.zeros(6, 2, dtype=torch.bool)
    first[[0, 3], 0] = True
    y, _ = core(x, core.initial_state(2, "cpu"), first)
    core.to(torch.bfloat16)
    y_bf16, _ = core(x.bfloat16(), core.initial_state(2, "cpu"), first)
    torch.testing.assert_close(y_bf16.float(), y, atol=0.05, rtol=0)
