"""benchmarks/cores.py's CPU-preset rows of the memories beside the LSTM (the linear ones, Mamba,
the GRU, the Transformer and GTrXL): they build the preset's core, run in a worker's measurement
(both modes, a learning call of --cpu-steps steps), and the ratios it prints and writes set them
against their references."""

import json

import pytest
import torch

from benchmarks import cores
from agents.cores.gtrxl import GatedAttentionBlock

ROWS = ["ffm-cpu", "lru-cpu", "mamba-cpu", "gru-cpu", "transformer-cpu", "gtrxl-cpu"]


@pytest.mark.parametrize("name", ROWS)
def test_a_cpu_preset_row_measures_both_modes(name):
    result = cores.measure(name, 2, torch.device("cpu"), 0.0, list(cores.MODES), cpu_steps=5)
    assert result["acting"] > 0 and result["acting_calls"] >= 1
    assert result["learning"] > 0 and result["learning_reps"] >= 1


def test_the_gtrxl_row_is_the_transformer_row_with_gated_layers():
    torch.manual_seed(0)
    plain, _ = cores.build("transformer-cpu", torch.device("cpu"))
    gated, _ = cores.build("gtrxl-cpu", torch.device("cpu"))
    assert not any(isinstance(m, GatedAttentionBlock) for m in plain.modules())
    assert sum(isinstance(m, GatedAttentionBlock) for m in gated.modules()) == cores.cpu_preset("transformer")["n_layers"]
    assert (gated.config.d_model, gated.config.span) == (plain.config.d_model, plain.config.span) == (64, 64)
    gru, _ = cores.build("gru-cpu", torch.device("cpu"))
    assert type(gru).__name__ == "GRUCore" and gru.output_dim == 128


def test_the_ratio_table_sets_each_row_against_its_references():
    results = {("ffm-cpu", 64): {"acting": 100.0, "learning": 300.0}, ("lru-cpu", 64): {"acting": 50.0},
               ("lstm-cpu", 64): {"acting": 200.0, "learning": 100.0}, ("feedback-cpu", 64): {"acting": 50.0, "learning": 30.0},
               ("gru-cpu", 64): {"acting": 300.0, "learning": 150.0},
               ("transformer-cpu", 64): {"acting": 40.0, "learning": 20.0}, ("gtrxl-cpu", 64): {"acting": 30.0, "learning": 10.0},
               ("ffm-cpu", 1): {"acting": 1.0}}  # no reference at B = 1: no row
    assert cores.ratio_table(results, [1, 64])[2:] == [
        "| ffm-cpu / lstm-cpu | 64 | 0.50 | 3.00 |", "| ffm-cpu / feedback-cpu | 64 | 2.00 | 10.00 |",
        "| lru-cpu / lstm-cpu | 64 | 0.25 | – |", "| lru-cpu / feedback-cpu | 64 | 1.00 | – |",
        "| gru-cpu / lstm-cpu | 64 | 1.50 | 1.50 |", "| gtrxl-cpu / transformer-cpu | 64 | 0.75 | 0.50 |",
        "| gtrxl-cpu / lstm-cpu | 64 | 0.15 | 0.10 |"]
    assert cores.ratio_table({("ffm-cpu", 64): {"acting": 1.0}}, [64]) == []
    assert {"ours": "lru-cpu", "reference": "lstm-cpu", "B": 64, "acting": 0.25, "learning": None} in cores.ratios(results, [64])


def test_json_holds_the_command_every_row_and_the_ratios(tmp_path, monkeypatch):
    out = tmp_path / "cores.json"
    argv = ["--cores", "gru-cpu", "lstm-cpu", "--sizes", "2", "--seconds", "0.01", "--cpu-steps", "3", "--threads", "1", "--json", str(out)]
    monkeypatch.setattr("sys.argv", ["benchmarks/cores.py", *argv])
    assert cores.main() == 0
    record = json.loads(out.read_text())
    assert record["command"] == "python benchmarks/cores.py " + " ".join(argv)
    assert record["cpu_steps"] == 3 and record["threads"] == 1 and len(record["load_average_before"]) == 3
    assert [(r["core"], r["B"]) for r in record["rows"]] == [("gru-cpu", 2), ("lstm-cpu", 2)]
    assert all(r["acting"] > 0 and r["learning"] > 0 for r in record["rows"])
    (ratio,) = record["ratios"]
    gru, lstm = record["rows"]
    assert (ratio["ours"], ratio["reference"]) == ("gru-cpu", "lstm-cpu")
    assert ratio["learning"] == pytest.approx(gru["learning"] / lstm["learning"])
