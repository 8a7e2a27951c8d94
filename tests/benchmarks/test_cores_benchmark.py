"""benchmarks/cores.py's CPU-preset rows of the linear memories: they run in a worker's
measurement (both modes, a learning call of --cpu-steps steps), and the ratios it prints set them
against the LSTM and the Feedback core."""

import pytest
import torch

from benchmarks import cores


@pytest.mark.parametrize("name", ["ffm-cpu", "lru-cpu"])
def test_a_linear_memory_row_measures_both_modes(name):
    result = cores.measure(name, 2, torch.device("cpu"), 0.0, list(cores.MODES), cpu_steps=5)
    assert result["acting"] > 0 and result["acting_calls"] >= 1
    assert result["learning"] > 0 and result["learning_reps"] >= 1


def test_the_ratio_table_sets_the_linear_memories_against_the_lstm_and_the_feedback_core():
    results = {("ffm-cpu", 64): {"acting": 100.0, "learning": 300.0}, ("lru-cpu", 64): {"acting": 50.0},
               ("lstm-cpu", 64): {"acting": 200.0, "learning": 100.0}, ("feedback-cpu", 64): {"acting": 50.0, "learning": 30.0},
               ("ffm-cpu", 1): {"acting": 1.0}}  # no reference at B = 1: no row
    assert cores.ratio_table(results, [1, 64])[2:] == [
        "| ffm-cpu / lstm-cpu | 64 | 0.50 | 3.00 |", "| ffm-cpu / feedback-cpu | 64 | 2.00 | 10.00 |",
        "| lru-cpu / lstm-cpu | 64 | 0.25 | – |", "| lru-cpu / feedback-cpu | 64 | 1.00 | – |"]
    assert cores.ratio_table({("ffm-cpu", 64): {"acting": 1.0}}, [64]) == []
