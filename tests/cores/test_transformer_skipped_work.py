"""The Transformer skips attention whose weights are exactly 0: the keys that no query of a call
sees (transformer.first_seen_key: those before every query's episode start), and in a long call
the keys after each chunk of queries (transformer.QUERY_CHUNK: their future). The same function:
over any sequence of learning and acting calls from any state, the outputs, every gradient and
the state equal those of calls that read all S + T keys in one matrix (the Transformer and the
reservoirs built on it, in float64 so that rounding cannot hide a difference)."""

import torch
from hypothesis import given, settings, strategies as st

from agents.cores import attention, transformer
from tests.cores.test_interface import INPUT_DIM, attention_options
from tests.cores.test_transformer_windows import FULL, assert_same_in_float64, core_of


def read_all_keys(starts: torch.Tensor) -> int:
    return 0


def run(core, calls, skip_unseen: bool, query_chunk: int):
    """Each (x, first, learning) call in turn from the initial state, the full-matrix path
    throughout (WINDOWED_FROM never), its queries in chunks of `query_chunk`: every output, the
    gradients of a fixed loss over each learning call's outputs (parameters and x), and the last
    state."""
    saved = transformer.WINDOWED_FROM, transformer.first_seen_key, transformer.QUERY_CHUNK
    transformer.WINDOWED_FROM, transformer.QUERY_CHUNK = FULL, query_chunk
    if not skip_unseen:
        transformer.first_seen_key = read_all_keys
    try:
        state, outputs, grads = core.initial_state(calls[0][0].shape[1], "cpu"), [], []
        params = [p for p in core.parameters() if p.requires_grad]
        for x, first, learning in calls:
            if learning:
                x = x.clone().requires_grad_(True)
                y, state = core(x, state, first)
                weights = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y)
                found = torch.autograd.grad((y * weights).sum(), [x, *params], allow_unused=True)
                grads += [torch.zeros_like(p) if g is None else g for p, g in zip([x, *params], found)]
            else:
                with torch.no_grad():
                    y, state = core(x, state, first)
            outputs.append(y.detach())
        return outputs, grads, state
    finally:
        transformer.WINDOWED_FROM, transformer.first_seen_key, transformer.QUERY_CHUNK = saved


@st.composite
def call_sequences(draw):
    """A Transformer or a reservoir on it, and 1 to 4 calls of 1 to 12 steps, each learning
    (gradients, nothing stored) or acting (keys stored, then reused), with episode starts."""
    name = draw(st.sampled_from(["transformer", "transformer", "reservoir"]))
    options = draw(attention_options(feedback=False))
    if name == "reservoir":
        options.update(kind=draw(st.sampled_from(["ffn", "transformer"])), n_reservoir=draw(st.integers(1, options["n_layers"])))
    batch = draw(st.integers(1, 3))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    calls = []
    for _ in range(draw(st.integers(1, 4))):
        steps = draw(st.integers(1, 12))
        first = torch.rand(steps, batch, generator=generator) < draw(st.sampled_from([0.0, 0.1, 0.3]))
        x = torch.randn(steps, batch, INPUT_DIM, generator=generator, dtype=torch.float64)
        calls.append((x, first, draw(st.booleans())))
    return core_of(name, options, draw(st.integers(0, 99)), torch.float64), calls


@settings(max_examples=30, deadline=None)
@given(case=call_sequences(), query_chunk=st.integers(1, 13))
def test_skipping_unseen_and_future_keys_computes_what_reading_all_in_one_matrix_does(case, query_chunk):
    core, calls = case
    one_matrix = run(core, calls, skip_unseen=False, query_chunk=FULL)
    assert_same_in_float64(run(core, calls, skip_unseen=True, query_chunk=FULL), one_matrix)
    assert_same_in_float64(run(core, calls, skip_unseen=True, query_chunk=query_chunk), one_matrix)


def test_the_first_seen_key_is_the_earliest_episode_start_on_the_cpu_and_0_elsewhere():
    """Every query sees keys from its episode's start on, so the first key any query sees is the
    least start; an accelerator reads every key rather than wait for that number (a host sync),
    and the meta device stands in for it."""
    starts = torch.tensor([[5, 3], [5, 4], [6, 4]])
    assert transformer.first_seen_key(starts) == 3
    assert transformer.first_seen_key(starts.to("meta")) == 0


def keys_read(monkeypatch, core, steps: int, outputs_from: int = 0) -> list[tuple[int, int]]:
    """(queries, keys) of each attention call the core's layers make in one call of `steps` steps
    from the initial state, 2 envs, no episode start inside, asked for the outputs from
    `outputs_from` on (TransformerCore.forward)."""
    read = []
    block = attention.AttentionBlock.forward
    with monkeypatch.context() as patch:
        patch.setattr(attention.AttentionBlock, "forward", lambda self, h, k, v, *rest: read.append((h.shape[1], k.shape[-2])) or block(self, h, k, v, *rest))
        core(torch.randn(steps, 2, INPUT_DIM), core.initial_state(2, "cpu"), torch.zeros(steps, 2, dtype=torch.bool), outputs_from)
    return read


def test_a_call_from_an_empty_memory_attends_over_its_own_steps_only(monkeypatch):
    """From the initial state no carried slot belongs to an episode (the learning call that
    follows the episode starts so): the call's attention reads its T keys, not S + T."""
    core = core_of("transformer", dict(d_model=8, n_heads=2, n_layers=1, span=200), seed=0)
    assert keys_read(monkeypatch, core, 10) == [(10, 10)]


def test_a_long_call_reads_each_chunk_of_queries_over_the_keys_up_to_its_last(monkeypatch):
    """150 steps at span 200 (the full matrix): chunks of 64 queries, over 64, 128 and 150 keys;
    dropout in training keeps the one call, whose masks it draws over the full width."""
    assert transformer.QUERY_CHUNK == 64
    core = core_of("transformer", dict(d_model=8, n_heads=2, n_layers=1, span=200), seed=0)
    assert keys_read(monkeypatch, core, 150) == [(64, 64), (64, 128), (22, 150)]
    core = core_of("transformer", dict(d_model=8, n_heads=2, n_layers=1, span=200, dropout=0.1), seed=0).train()
    assert keys_read(monkeypatch, core, 150) == [(150, 150)]
