"""The keeping designs' table (experiments/keep_cue_table.py): every cell from the JSON it names,
"not run" where there is none."""

import json

from experiments import keep_cue_table


def sweep_run(seed, frames):
    return {"seed": seed, "solved": frames is not None, "frames_to_solve": frames, "checks": []}


def test_each_cell_comes_from_its_json_and_what_was_not_run_says_so(tmp_path):
    (tmp_path / "keep_cue_fresh.json").write_text(json.dumps({"models": {
        "feedback-span16": {"64": {"median": {"retention": 0.886, "gradient_to_cue": 1.2e-3}}},
        "feedback-span16-carry": {"64": {"median": {"retention": 0.989, "gradient_to_cue": 3.1e-2}}}}}))
    (tmp_path / "keep_cue.json").write_text(json.dumps({"models": {"feedback-span16-carry": {"lengths": {
        "64": {"per_seed": [sweep_run(0, 300_000), sweep_run(1, 500_000), sweep_run(2, None)]},
        "128": {"per_seed": [sweep_run(0, 2_000_000), sweep_run(1, None), sweep_run(2, None)]}}}}}))
    (tmp_path / "keep_cue_probes.json").write_text(json.dumps({"models": {"feedback-span16-carry": {"64": {
        "per_seed": [{}, {}, {}], "median": {"trained": {"retention": 1.01, "gradient_to_cue": 0.2}}}}}}))
    keep_cue_table.main(["--out", str(tmp_path)])
    lines = {line.split(" | ")[0].lstrip("| "): line for line in (tmp_path / "keep_cue_table.md").read_text().splitlines() if line.startswith("| feedback")}
    assert "| 0.989 -> 1.010 | 3.1e-02 -> 2.0e-01 | L 64: 2/3 (400k); L 128: 1/3 (2.00M); reach 64 (keep_cue.json) | not run |" in lines["feedback-span16-carry"]
    assert "| 0.886 -> not run | 1.2e-03 -> not run | not run | not run |" in lines["feedback-span16"]
    assert "| not run -> not run | not run -> not run | not run | not run |" in lines["feedback-span16-tanh"]
    cells = json.loads((tmp_path / "keep_cue_table.json").read_text())
    assert cells["feedback-span16-carry"]["a2c"]["64"] == {"solved": 2, "runs": 3, "median_frames": 400_000.0, "source": "keep_cue.json"}
    assert cells["feedback-span16-carry"]["trained"]["source"] == "keep_cue_probes.json"
