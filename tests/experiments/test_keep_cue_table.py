"""The keeping designs' table (experiments/keep_cue_table.py): every cell from the JSON it names,
"not run" where there is none."""

import json

from experiments import keep_cue_table


def sweep_run(seed, frames):
    return {"seed": seed, "solved": frames is not None, "frames_to_solve": frames, "checks": []}


def test_each_cell_comes_from_its_json_and_what_was_not_run_says_so(tmp_path):
    assets, tmp_path = tmp_path, tmp_path / "memory_length"  # the costs elsewhere are in the folders beside it
    tmp_path.mkdir()
    (assets / "memory_reach").mkdir()
    walk = {f"{core} span 1": {"per_seed": [{}] * 5, "test": {"iqm": iqm, "ci_low": low, "ci_high": high}}
            for core, iqm, low, high in (("feedback", 0.87, 0.7, 0.96), ("feedback-carry", 0.995, 0.99, 1.0), ("transformer", 0.5, 0.4, 0.6))}
    (assets / "memory_reach" / "memory_reach_carry.json").write_text(json.dumps({"tasks": {"random_walk": {"rows": walk}}}))
    (assets / "mazes").mkdir()  # the maze: the carry's run only, so the paper's model's cell says "not run"
    (assets / "mazes" / "keep_cue_maze_carry.json").write_text(json.dumps({"envs": {"maze": {"cores": {
        "feedback": {"per_seed": [{}] * 5, "eval_return": {"iqm": 5.5, "ci_low": 5.25, "ci_high": 5.66}}}}}}))
    (assets / "mazes" / "keep_cue_water_maze_paper.json").write_text(json.dumps({"envs": {"water_maze": {"cores": {  # the paper's only
        "feedback": {"per_seed": [{}] * 5, "eval_return": {"iqm": 1.23, "ci_low": 0.98, "ci_high": 1.48}}}}}}))
    (assets / "speed").mkdir()
    (assets / "speed" / "feedback_compiled_carry_epyc.json").write_text(json.dumps({"recall": {"median_ms": {
        "carry, compiled": 292.4, "carry, python": 800.0, "paper, compiled": 290.0, "paper, python": 712.0}}}))
    (assets / "speed" / "feedback_compiled_tanh_epyc.json").write_text(json.dumps({"recall": {"median_ms": {  # its own run: the paper's again
        "tanh, compiled": 325.2, "paper, compiled": 385.1}}}))
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
    assert ("| 0.989 -> 1.010 | 3.1e-02 -> 2.0e-01 | L 64: 2/3 (400k); L 128: 1/3 (2.00M); reach 64 (keep_cue.json) | not run "
            "| 0.99 [0.99, 1.00] (5 seeds) | not run | 5.50 [5.25, 5.66] (5 seeds) | not run | 292 (paper 290) |") in lines["feedback-span16-carry"]
    assert "| 0.886 -> not run | 1.2e-03 -> not run | not run | not run | 0.87 [0.70, 0.96] (5 seeds) | not run | not run | 1.23 [0.98, 1.48] (5 seeds) | 290 |" in lines["feedback-span16"]
    assert "| not run -> not run | not run -> not run | not run | not run | not run | not run | not run | not run | 325 (paper 385) |" in lines["feedback-span16-tanh"]
    assert "| not run -> not run | not run -> not run | not run | not run | not run | not run | not run | not run | not run |" in lines["feedback-span16-kept"]
    caption = (tmp_path / "keep_cue_table.md").read_text().splitlines()[0]  # names the files the cells came from, no others
    assert "(from keep_cue_maze_carry.json, keep_cue_water_maze_paper.json, memory_reach_carry.json);" in caption
    cells = json.loads((tmp_path / "keep_cue_table.json").read_text())
    assert cells["feedback-span16-carry"]["a2c"]["64"] == {"solved": 2, "runs": 3, "median_frames": 400_000.0, "source": "keep_cue.json"}
    assert cells["feedback-span16-carry"]["trained"]["source"] == "keep_cue_probes.json"
    assert cells["feedback-span16-carry"]["maze"] == {"iqm": 5.5, "ci_low": 5.25, "ci_high": 5.66, "seeds": 5, "source": "keep_cue_maze_carry.json"}
