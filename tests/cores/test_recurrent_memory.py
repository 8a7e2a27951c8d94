"""A span-1 Feedback Transformer is a recurrence: every step reads only the memory vector of the
step before. Supervised, it learns to carry a bit across the corridor's distance within a few
updates, so when an RL agent built on it fails the corridor, its capacity is not the reason
(README, Figure 3: what the probes found)."""

import pytest
import torch
import torch.nn.functional as F

from agents.cores import make_core

STEPS, BATCH, INPUT = 8, 64, 8  # the bit at step 0, read out at step 7: the 8-cell corridor's distance
# A core without memory cannot pass at any number of updates: at the last step both bits give the
# same input, so a batch of 64 is all right with probability 2**-64 (tested below). So the limit
# only has to lie above what working cores need: measured over seeds 0-2, 14-20 updates for
# feedback at span 1, 69-85 for the LSTM and 50-89 for the GRU (width 32); 200 is 2.2 times the
# slowest.
MAX_UPDATES = 200


def updates_to_carry_a_bit(core, cut_memory: bool = False) -> int | None:
    """Adam updates until 10 batches in a row are all classified right (None: not within
    MAX_UPDATES). cut_memory: every step starts an episode, so nothing is carried."""
    head = torch.nn.Linear(core.output_dim, 2)
    optimizer = torch.optim.Adam([*core.parameters(), *head.parameters()], lr=1e-3)
    first = torch.zeros(STEPS, BATCH, dtype=torch.bool)
    first[0] = True
    first[1:] = cut_memory
    streak = 0
    for update in range(MAX_UPDATES):
        bit = torch.randint(0, 2, (BATCH,))
        x = torch.zeros(STEPS, BATCH, INPUT)
        x[0, :, 0], x[0, :, 1] = bit.float(), 1.0 - bit.float()  # the cue
        x[1:, :, 2] = 1.0  # then the same corridor input at every step
        y, _ = core(x, core.initial_state(BATCH, "cpu"), first)
        logits = head(y[-1])
        loss = F.cross_entropy(logits, bit)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        streak = streak + 1 if bool((logits.argmax(-1) == bit).all()) else 0
        if streak == 10:
            return update
    return None


@pytest.mark.parametrize("name, options", [("feedback", {"span": 1, "d_model": 32, "n_heads": 2}), ("lstm", {"hidden_size": 32}), ("gru", {"hidden_size": 32})])
def test_a_span_1_feedback_core_learns_to_carry_a_bit_across_the_corridor(name, options):
    torch.manual_seed(0)
    assert updates_to_carry_a_bit(make_core(name, INPUT, **options)) is not None



def test_a_core_without_memory_never_carries_the_bit():
    """The control: the span-1 Feedback core reset at every step, so nothing is carried, cannot
    learn the task, so passing it above says the memory works."""
    torch.manual_seed(0)
    assert updates_to_carry_a_bit(make_core("feedback", INPUT, span=1, d_model=32, n_heads=2), cut_memory=True) is None
