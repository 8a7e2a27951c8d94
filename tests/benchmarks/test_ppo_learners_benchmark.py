"""benchmarks/ppo_learners.py runs end to end (one short round): a row per learner, the ratio
line, and each learner's acting and learning timed."""

from benchmarks import ppo_learners


def test_one_short_round_times_both_learners(capsys):
    times = ppo_learners.main(["--rounds", "1", "--envs", "8", "--rollout", "16"])
    out = capsys.readouterr().out
    assert "| recompute |" in out and "| cached_memory |" in out and "cached_memory / recompute: update time" in out
    assert set(times) == {"recompute", "cached_memory"} and all(acting > 0 and learning > 0 for acting, learning in times.values())
