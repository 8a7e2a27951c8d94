"""The memory-length curve's answer (experiments/memory_length_answer.py): reach, score and the
cliff with what was measured there, read from the sweeps' JSON; the committed table regenerates
from the committed JSON."""

import json
import shutil
from pathlib import Path

import pytest

from experiments import memory_length_answer as answer_module
from experiments.frame.jobs import ROOT

ASSETS = ROOT / "assets" / "memory_length"


def cell(greedy: list[float]) -> dict:
    """A sweep's cell of these per-seed greedy successes (the interval's numbers made up: the
    answer copies them, and only the per-seed numbers decide what is solved)."""
    solved = sum(g >= 0.95 for g in greedy)
    return {"per_seed": [{"seed": s, "greedy_success": g} for s, g in enumerate(greedy)],
            "greedy": {"iqm": sum(greedy) / len(greedy), "ci_low": min(greedy), "ci_high": max(greedy)},
            "solved": {"solved": solved, "runs": len(greedy), "ci_low": 0.0, "ci_high": 1.0}}


def write(folder: Path, stem: str, record: dict) -> None:
    (folder / f"{stem}.json").write_text(json.dumps(record))


@pytest.fixture
def sweeps(tmp_path) -> tuple[Path, dict]:
    """One learner: a sweep of L = 1, 2, 4 whose core fails at 4 (1 of 3) and has a run of L = 8 in
    its ledger only; 4x the frames at 4; probes at 4. The MLP fails everywhere."""
    write(tmp_path, "sweep", {"solved_at": 0.95, "frames": {"1": 100, "2": 200, "4": 400},
                              "models": {"core": {"lengths": {"1": cell([1.0, 1.0, 0.58]), "2": cell([1.0, 0.42, 1.0]), "4": cell([0.58, 1.0, 0.42])}},
                                         "mlp": {"lengths": {"1": cell([0.58, 0.42, 0.58])}}}})
    evaluation = {"last_line": json.dumps({"results": {"agent": {"success": {"mean": 1.0}}}})}
    write(tmp_path, "sweep_runs", {"core/L8/seed0": {"evaluate.done.json": evaluation}, "core/L1/seed0": {"evaluate.done.json": evaluation}})
    write(tmp_path, "budget", {"models": {"core": {"length": 4, "frames": 1600, **cell([1.0, 1.0, 0.42])}}})
    numbers = {"gradient_to_cue": 1e-3, "cue_separation": 0.1}
    write(tmp_path, "probes", {"models": {"core": {"4": {"per_seed": [{}, {}, {}], "median": {"fresh": numbers, "trained": numbers}}}}})
    return tmp_path, {"a2c": {"sweeps": ["sweep"], "longer": ["budget"], "probes": ["probes"]}}


def test_reach_score_and_the_cliff_with_its_measurements(sweeps):
    out, inputs = sweeps
    core = answer_module.answer(out, inputs)["learners"]["a2c"]["models"]["core"]
    assert core["reaches"] == 2  # 1 and 2 solved by most (2 of 3), 4 not
    assert core["score"] == round(2 / answer_module.SWEPT, 2)  # over the 9 lengths 1 to 256, whatever the sweep ran
    assert core["cliff"]["length"] == 4 and core["cliff"]["solved"]["solved"] == 1
    assert core["cliff"]["longer"] == {"frames": 1600, "scale": 4.0, "solved": core["cliff"]["longer"]["solved"], "greedy_per_seed": [1.0, 1.0, 0.42]}
    assert core["cliff"]["longer"]["solved"]["solved"] == 2
    assert core["cliff"]["probes"]["seeds"] == 3 and core["cliff"]["probes"]["fresh"]["gradient_to_cue"] == 1e-3


def test_a_finished_length_has_the_wilson_interval_of_its_runs_solved(sweeps):
    """The issue asks for success against length with Wilson intervals: 2 of 3 runs solved gives
    the Wilson 95% interval [0.2077, 0.9385] (z = 1.96), from the per-seed numbers, not the
    sweep's stored interval (made up in `cell`)."""
    out, inputs = sweeps
    solved = answer_module.answer(out, inputs)["learners"]["a2c"]["models"]["core"]["solved"]["2"]
    assert solved["solved"] == 2 and solved["runs"] == 3
    assert solved["ci_low"] == pytest.approx(0.2077, abs=1e-4) and solved["ci_high"] == pytest.approx(0.9385, abs=1e-4)


def test_the_figure_is_drawn_with_both_rows(sweeps, tmp_path):
    out, inputs = sweeps
    result = answer_module.answer(out, inputs)
    result["learners"]["ppo"] = result["learners"]["a2c"]
    answer_module.draw(result, tmp_path / "answer.png")
    assert (tmp_path / "answer.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_length_under_way_is_shown_from_the_ledger_and_not_counted(sweeps):
    out, inputs = sweeps
    result = answer_module.answer(out, inputs)
    core = result["learners"]["a2c"]["models"]["core"]
    assert core["solved"]["8"] == {"solved": 1, "runs": 1, "under_way": True}
    assert core["solved"]["1"]["runs"] == 3  # a finished length is the JSON's, not the ledger's copy of its runs
    assert core["reaches"] == 2  # a solved run of a length under way does not extend the reach


def test_the_floor_has_no_cliff_and_a_learner_missing_from_the_table_is_a_dash(sweeps):
    out, inputs = sweeps
    result = answer_module.answer(out, inputs)
    assert result["learners"]["a2c"]["models"]["mlp"]["cliff"] is None  # the chance line, not a core that stopped
    result["learners"]["ppo"] = {"models": {}}
    text = answer_module.table(result)
    assert "| core | 2 | 0.22 | - | - | 2 / - | 2 / - | 1 / - | 1 of 1 so far / - |" in text
    assert "| core | A2C | 4 (1 of 3) | 4x: 2 of 3 | 1e-03 -> 1e-03 | - |" in text


def test_a_missing_input_names_the_file(sweeps):
    out, inputs = sweeps
    (out / "probes.json").unlink()
    with pytest.raises(FileNotFoundError, match="probes.json is missing"):
        answer_module.answer(out, inputs)


def test_the_committed_answer_is_what_the_committed_json_gives(tmp_path):
    """assets/memory_length/memory_length_answer.md follows the sweeps' JSON run by run: regenerate it after a
    sweep's JSON or ledger changes (python -m experiments.memory_length_answer)."""
    stems = {stem for sources in answer_module.SOURCES.values() for stem in sum(sources.values(), [])}
    for stem in stems | {f"{stem}_runs" for sources in answer_module.SOURCES.values() for stem in sources["sweeps"]}:
        if (ASSETS / f"{stem}.json").exists():
            shutil.copy(ASSETS / f"{stem}.json", tmp_path)
    assert answer_module.table(answer_module.answer(tmp_path)) == (ASSETS / "memory_length_answer.md").read_text()


def test_a_length_the_stop_rule_skipped_reads_stop_and_one_beyond_the_sweep_a_dash(tmp_path):
    """A sweep of L = 1, 2, 4 whose core stopped after 2 (two lengths no seed solves): its 4 was
    skipped by the rule ("stop"); L = 8, run for the MLP only in another sweep, was never asked of
    the core ("-"), so a core's last length is not read as a cliff where no sweep went further."""
    write(tmp_path, "sweep", {"solved_at": 0.95, "frames": {"1": 100, "2": 200, "4": 400}, "lengths": [1, 2, 4], "stopped": {"core": 2},
                              "models": {"core": {"lengths": {"1": cell([0.5, 0.5, 0.5]), "2": cell([0.5, 0.5, 0.5])}},
                                         "mlp": {"lengths": {"1": cell([0.5] * 3), "2": cell([0.5] * 3), "4": cell([0.5] * 3)}}}})
    write(tmp_path, "more", {"solved_at": 0.95, "frames": {"8": 800}, "lengths": [8], "stopped": {}, "models": {"mlp": {"lengths": {"8": cell([0.5] * 3)}}}})
    result = answer_module.answer(tmp_path, {"a2c": {"sweeps": ["sweep", "more"], "longer": [], "probes": []}})
    assert result["learners"]["a2c"]["models"]["core"]["stopped"] == ["4"]
    result["learners"]["ppo"] = {"models": {}}
    assert "| core | none | 0.00 | - | - | 0 / - | 0 / - | stop / - | - / - |" in answer_module.table(result)
