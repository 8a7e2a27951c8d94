"""The T-maze's answer (experiments/tmaze_answer.py): each block's runs solved per length and
reach, a length under way from the ledger, Ni et al.'s budget row; the committed table
regenerates from the committed JSON."""

import json
import shutil

from experiments import tmaze_answer
from experiments.memory_length import ni_frames
from tests.experiments.test_memory_length_answer import ASSETS, cell, write

BLOCKS = {"onpolicy": ("A2C", "200,000 frames", ["short"]), "dqn": ("DQN", "stopped when solved", ["dqn"])}


def test_blocks_their_reach_a_length_under_way_and_ni_s_budget_row(tmp_path):
    """An on-policy sweep of L = 2, 4 (4 solved by 1 of 3) and a DQN sweep of L = 32 (3 of 3)
    whose L = 64 has one run in its ledger: reaches 2 and "32, going on"; Ni et al.'s budget at
    each length the table shows."""
    write(tmp_path, "short", {"solved_at": 0.95, "frames": {"2": 100, "4": 100}, "models": {"lstm": {"lengths": {
        "2": cell([1.0, 1.0, 0.5]), "4": cell([1.0, 0.5, 0.5])}}}})
    write(tmp_path, "dqn", {"solved_at": 0.95, "frames": {"32": 400}, "models": {"lstm": {"lengths": {"32": cell([1.0, 1.0, 1.0])}}}})
    evaluation = {"last_line": json.dumps({"results": {"agent": {"success": {"mean": 1.0}}}})}
    write(tmp_path, "dqn_runs", {"lstm/L64/seed0": {"evaluate.done.json": evaluation}})
    result = tmaze_answer.tmaze_answer(tmp_path, BLOCKS)
    assert result["lengths"] == [2, 4, 32, 64]
    short, dqn = result["blocks"]["onpolicy"]["models"]["lstm"], result["blocks"]["dqn"]["models"]["lstm"]
    assert short["reaches"] == 2 and short["solved"]["4"]["solved"] == 1
    assert dqn["reaches"] == 32 and dqn["solved"]["64"] == {"solved": 1, "runs": 1, "under_way": True}
    assert result["ni"]["budget_frames"] == {str(length): ni_frames(length) for length in (2, 4, 32, 64)}
    text = tmaze_answer.table(result)
    assert "| A2C | 200,000 frames | lstm | 2 | 1 | - | - | 2 |" in text
    assert "| DQN | stopped when solved | lstm | - | - | 3 | 1 of 1 so far | 32, going on |" in text
    assert "| DQN (Ni et al.) | their budget a run | GPT-2 over the episode | 1M steps | 1M steps | 1M steps | 2M steps | 1,500 (their paper) |" in text
    tmaze_answer.draw(result, tmp_path / "answer.png")
    assert (tmp_path / "answer.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_committed_answer_is_what_the_committed_json_gives(tmp_path):
    """assets/memory_length/tmaze_answer.md follows the T-maze sweeps' JSON and ledgers run by run:
    regenerate it after one changes (python -m experiments.tmaze_answer)."""
    for _, _, stems in tmaze_answer.BLOCKS.values():
        for stem in stems:
            for name in (f"{stem}.json", f"{stem}_runs.json"):
                if (ASSETS / name).exists():
                    shutil.copy(ASSETS / name, tmp_path)
    assert tmaze_answer.table(tmaze_answer.tmaze_answer(tmp_path)) == (ASSETS / "tmaze_answer.md").read_text()
