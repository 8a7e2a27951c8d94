"""The models: feed-forward attention as the paper defines it, padding that changes nothing,
and the errors for models that do not fit a task."""

import dataclasses

import numpy as np
import pytest
import torch

from seqtasks.config import SeqConfig
from seqtasks.ffattn import FeedForwardAttention
from seqtasks.models import SequenceRegressor, TokenModel, build_model, core_settings
from seqtasks.tasks import make_task
from tests.float32 import approx32, close32

torch.manual_seed(0)


def left_pad(x, steps):
    return torch.cat([torch.randn(x.shape[0], steps, x.shape[2]), x], dim=1)  # padding of random junk


@pytest.mark.parametrize("attention", [True, False])
def test_ffattn_ignores_left_padding(attention):
    model = FeedForwardAttention(2, 16, attention)
    x = torch.randn(3, 10, 2)
    lengths = torch.tensor([10, 10, 10])
    # float32 sums over 10 or 15 steps (padding adds zero weights) round differently
    np.testing.assert_allclose(model(x, lengths).detach(), model(left_pad(x, 5), lengths).detach(), **close32(terms=15))


def leaky(z, slope):
    return torch.where(z > 0, z, slope * z)


@pytest.mark.parametrize("slope", [0.0, 0.01, 0.3])
def test_ffattn_matches_the_paper_equations(slope):
    model = FeedForwardAttention(2, 8, attention=True, negative_slope=slope)
    x = torch.randn(1, 6, 2)
    h = leaky(x[0] @ model.step.weight.T + model.step.bias, slope)  # (L, D)
    alpha = torch.softmax(torch.tanh(h @ model.score.weight.T + model.score.bias)[:, 0], dim=0)
    c = (alpha[:, None] * h).sum(0)
    s = leaky(model.hidden.weight @ c + model.hidden.bias, slope)
    y = leaky(model.out.weight @ s + model.out.bias, slope)
    assert model(x, torch.tensor([6])).item() == approx32(y.item(), terms=8)  # float32, batched vs by hand: sums of 8


def test_ffattn_starts_as_published():
    """Weights from N(0, 1 / fan_in), every bias 0 (arXiv:1512.08756v1, section 2.1)."""
    torch.manual_seed(0)
    model = FeedForwardAttention(2, 100)
    for layer in (model.step, model.score, model.hidden, model.out):
        assert not layer.bias.any()
    # 10,000 draws of N(0, 0.01): the sample std is within 3% of 0.1 (its own std is 0.7%)
    assert model.hidden.weight.std().item() == pytest.approx(0.1, rel=0.03)
    assert model.step.weight.abs().max().item() < 6 / 2**0.5  # std 1 / sqrt(2): no draw past 6 sigma


def test_mean_variant_averages_the_steps():
    model = FeedForwardAttention(2, 8, attention=False, negative_slope=0.01)
    x = torch.randn(1, 4, 2)
    c = leaky(model.step(x[0]), 0.01).mean(0)
    expected = leaky(model.out(leaky(model.hidden(c), 0.01)), 0.01)
    assert model(x, torch.tensor([4])).item() == approx32(expected.item(), terms=8)  # float32, batched vs by hand: sums of 8


@pytest.mark.parametrize("core", ["feedback", "transformer", "lstm", "gru"])
def test_sequence_regressor_ignores_left_padding(core):
    config = SeqConfig(core=core, d_model=16, n_layers=1, n_heads=2, span=8, dropout=0.0, bptt=4)
    model = SequenceRegressor(core, core_settings(config, {}), 2, 0.5, block=4).eval()
    x = torch.randn(2, 9, 2)
    lengths = torch.tensor([9, 9])
    with torch.no_grad():
        # float32 through a core of width 16 over other BPTT blocks: rounding differs, nothing leaks
        np.testing.assert_allclose(model(x, lengths), model(left_pad(x, 6), lengths), **close32(terms=16))


def test_token_model_shapes_and_core_settings():
    config = SeqConfig(core="lstm", d_model=24, n_layers=2)
    assert core_settings(config, {}) == {"hidden_size": 24, "n_layers": 2}
    assert core_settings(dataclasses.replace(config, core="feedback"), {"span": 7})["span"] == 7
    model = TokenModel("lstm", core_settings(config, {}), n_inputs=5, n_outputs=9, embed_dim=24)
    tokens = torch.randint(0, 5, (6, 3))
    logits, _ = model(tokens, model.initial_state(3, torch.device("cpu")), torch.zeros(6, 3, dtype=torch.bool))
    assert logits.shape == (6, 3, 9)


def test_sequence_only_models_refuse_token_tasks():
    config = SeqConfig(task="copy", core="ffattn")
    with pytest.raises(ValueError, match="core 'ffattn' embeds a whole sequence.*not 'copy'"):
        build_model(config, make_task("copy", config), {})
