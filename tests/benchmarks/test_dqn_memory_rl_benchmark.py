"""benchmarks/dqn_memory_rl.py: its rounds against a stand-in for Ni et al.'s main.py (which logs
one progress.csv row an episode, as theirs does), and its refusals."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from benchmarks import dqn_memory_rl

# Their main.py as the benchmark sees it: flags, then a row of env steps an episode under
# SAVE_DIR/.../progress.csv, until stopped; its pid in SAVE_DIR/../pid so the test can check it ended.
STAND_IN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    flags = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    steps, episode = 0, int(flags["--config_env.env_name"]) + 1
    folder = Path(flags["--save_dir"]) / "tmaze_passive" / "run"
    folder.mkdir(parents=True)
    (Path(flags["--save_dir"]) / "pid").write_text(str(__import__("os").getpid()))
    with open(folder / "progress.csv", "w") as f:
        f.write("env_steps,critic_loss\\n")
        while True:
            steps += episode
            f.write(f"{steps},0.0\\n")
            f.flush()
            time.sleep(0.01)
""")


def stand_in(tmp_path: Path) -> Path:
    checkout = tmp_path / "Memory-RL"
    (checkout / "envs").mkdir(parents=True)
    (checkout / "main.py").write_text(STAND_IN)
    (checkout / "envs" / "tmaze.py").write_text("")
    return checkout


def test_each_learner_is_timed_over_its_rounds_episodes_and_theirs_ends_with_the_run(tmp_path, monkeypatch):
    pids = []
    original = dqn_memory_rl.Theirs.close

    def close(self):
        pids.append(int((self.folder / "pid").read_text()))
        original(self)

    monkeypatch.setattr(dqn_memory_rl.Theirs, "close", close)
    out = tmp_path / "result.json"
    result = dqn_memory_rl.main(["--checkout", str(stand_in(tmp_path)), "--length", "3", "--episodes", "2", "--rounds", "2",
                                 "--budget-episodes", "100", "--json", str(out)])
    assert json.loads(out.read_text()) == result
    assert [r["steps"] for r in result["rounds"]["ours"]] == [2 * 4, 2 * 4]  # 2 episodes of L + 1 = 4 steps a round
    assert all(r["steps"] >= 2 * 4 and r["seconds"] > 0 for r in result["rounds"]["theirs"])
    ratio = result["seconds_per_100k_steps"]["theirs"] / result["seconds_per_100k_steps"]["ours"]
    assert result["theirs_over_ours"] == pytest.approx(ratio, abs=0.005)  # (written to 2 decimals)
    with pytest.raises(ProcessLookupError):  # their process is gone, not left paused
        os.kill(pids[0], 0)


def test_a_checkout_inside_this_repository_or_without_their_files_is_refused(tmp_path):
    inside = Path(dqn_memory_rl.__file__).resolve().parent
    with pytest.raises(ValueError, match="inside this repository"):
        dqn_memory_rl.main(["--checkout", str(inside)])
    with pytest.raises(FileNotFoundError, match="not a checkout of https://github.com/twni2016/Memory-RL"):
        dqn_memory_rl.main(["--checkout", str(tmp_path)])


@pytest.mark.parametrize("flag", ["--length", "--episodes", "--rounds", "--budget-episodes"])
def test_counts_below_one_exit_2_naming_the_value(flag, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        dqn_memory_rl.main(["--checkout", str(tmp_path), flag, "0"])
    assert exit_.value.code == 2 and f"{flag} must be >= 1, got 0" in capsys.readouterr().err
