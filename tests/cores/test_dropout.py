"""Dropout where Fan et al. (and their code) put it: on the attention weights (the persistent
vectors' included) and on the feed-forward ReLU activations, never on a sublayer's output.

Each query row of an AttentionBlock in train mode is checked against the naive layer of
naive_cores.py given the same dropout masks, replayed from the generator: dropout draws its mask
from the global generator, so the same seed and the same shapes, in the same order, give the
same masks. The Feedback core with dropout is checked against its reference model in
test_feedback_paths.py."""


import pytest
import torch

from agents.cores import make_core
from agents.cores.attention import AttentionBlock, split_heads
from agents.cores.dropout import Dropout, draw_masks

from benchmarks.naive_cores import attention_layer, consecutive_steps_back

B, H, D, FF, KEYS, P = 2, 2, 8, 12, 5, 0.4
INPUT_DIM = 5


def replayed_masks(seed: int, queries: int, persistent: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The masks an AttentionBlock draws after torch.manual_seed(seed): attention weights
    (B, H, Q, K + N), then ReLU activations (B, Q, F) when the block has a feed-forward sublayer."""
    torch.manual_seed(seed)
    like = torch.zeros(())
    weights = draw_masks(1, (B, H, queries, KEYS + persistent), P, like)[0]
    relu = None if persistent else draw_masks(1, (B, queries, FF), P, like)[0]
    return weights, relu


@pytest.mark.parametrize("queries", [1, 3])  # 1: an acting step, one row of distances
@pytest.mark.parametrize("persistent", [0, 2])
@pytest.mark.parametrize("pre_norm", [True, False])
def test_dropout_falls_on_attention_weights_and_relu_activations(queries, persistent, pre_norm):
    torch.manual_seed(0)
    block = AttentionBlock(D, H, KEYS, FF, P, pre_norm, persistent).train()
    h = torch.randn(B, queries, D, requires_grad=True)
    memory_k, memory_v = torch.randn(B, KEYS, D, requires_grad=True), torch.randn(B, KEYS, D, requires_grad=True)
    newest = 1  # the last key one step before the last query, as the Feedback memory's
    steps_back = consecutive_steps_back(queries, KEYS, newest)  # (Q, K)
    block_distance = steps_back if queries == 1 else newest  # the block's two forms: one row, or consecutive keys
    visible = (torch.rand(B, queries, KEYS) < 0.7) & (steps_back >= 0)  # never a key in its query's future
    distance = steps_back.clamp(min=0)  # the naive layer's, per query
    visible[0, 0] = False  # a query that sees no key
    inputs = [h, memory_k, memory_v, *block.parameters()]

    torch.manual_seed(1)
    y = block(h, split_heads(memory_k, H), split_heads(memory_v, H), block_distance, visible)  # (B, Q, D)
    weight_mask, relu_mask = replayed_masks(1, queries, persistent)
    expected = torch.stack([
        attention_layer(block, h[:, q], memory_k, memory_v, distance[q], visible[:, q], pre_norm, H,
                        (weight_mask[:, :, q], relu_mask[:, q] if relu_mask is not None else 1.0))
        for q in range(queries)
    ], dim=1)
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=0)
    cotangent = torch.randn_like(y)
    grads = torch.autograd.grad((y * cotangent).sum(), inputs, allow_unused=True)
    expected_grads = torch.autograd.grad((expected * cotangent).sum(), inputs, allow_unused=True)
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)

    block.eval()  # no dropout at all
    plain = torch.stack([attention_layer(block, h[:, q], memory_k, memory_v, distance[q], visible[:, q], pre_norm, H) for q in range(queries)], dim=1)
    torch.testing.assert_close(block(h, split_heads(memory_k, H), split_heads(memory_v, H), block_distance, visible), plain, atol=1e-5, rtol=0)


def test_dropout_masks_have_nn_dropouts_distribution():
    torch.manual_seed(0)
    layer = Dropout(P).train()
    y = layer(torch.ones(200_000))
    kept = y != 0
    assert torch.all(y[kept] == 1 / (1 - P))
    # 200,000 draws: the dropped fraction's standard deviation is sqrt(P (1 - P) / n) = 0.0011
    assert abs(1 - kept.float().mean().item() - P) < 0.006
    assert torch.equal(layer.eval()(y), y)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        Dropout(1.0)


def test_the_feedback_tape_keeps_its_dropout_masks_as_bool(monkeypatch):
    """A recording run keeps every step's masks for the backward pass: one byte an entry, a
    quarter of float32's (at the paper's maze sizes, 28.5 MiB a step as float32). The Python
    step's tape; the compiled step's holds the same bool masks (the run's) and scales a step's
    at a time."""
    monkeypatch.setenv("FEEDBACK_RL_COMPILED", "0")
    torch.manual_seed(0)
    core = make_core("feedback", INPUT_DIM, d_model=D, n_heads=H, n_layers=2, span=KEYS, d_ff=FF, dropout=P).train()
    run = core.open(core.initial_state(B, "cpu"), 2)
    for _ in range(2):
        run.step(torch.randn(B, INPUT_DIM), torch.zeros(B, dtype=torch.bool))
    for tape in run.tapes:
        for attention, relu in tape.masks:
            assert (attention.dtype, attention.shape, relu.dtype, relu.shape) == (torch.bool, (B, H, KEYS), torch.bool, (B, FF))
