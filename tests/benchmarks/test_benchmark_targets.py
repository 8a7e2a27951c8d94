"""The benchmarks' targets on fixed numbers (no timing): every target is a ratio of two speeds
from the same run, a missing side is skipped rather than failed, and `--check`'s exit status;
and the floor of a call's time, which a pause leaves out (on a planted clock)."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import a2c, cores, ffattn, seqtasks, targets
from benchmarks import distributed as distributed_benchmark
from benchmarks import envs as envs_benchmark
from benchmarks.targets import Verdict, floor_per_call, interleaved, per_call, ratio_target, report


def test_ratio_target_passes_at_the_bound_and_fails_below():
    assert ratio_target("a / b", 3.0, 10.0, 0.3, "").passed
    verdict = ratio_target("a / b", 2.9, 10.0, 0.3, "")
    assert not verdict.passed
    assert verdict.line() == "FAIL  a / b: 0.29 (target >= 0.3)"


def test_a_missing_side_is_skipped_with_the_reason():
    verdict = ratio_target("a / b", 3.0, None, 0.3, "needs b")
    assert verdict.ratio is None and not verdict.passed
    assert verdict.line() == "SKIP  a / b >= 0.3: needs b"


@pytest.mark.parametrize(
    "ratios, check, status",
    [
        ([2.0, 1.5], True, 0),
        ([2.0, 0.5], True, 1),  # one measured target fails
        ([2.0, 0.5], False, 0),  # without --check the status is always 0
        ([2.0, None], True, 0),  # a skipped target is no failure
        ([None, None], True, 1),  # nothing measured: nothing was checked
    ],
)
def test_report_exit_status(ratios, check, status, capsys):
    verdicts = [Verdict(f"t{i}", 1.0, ratio, "not run") for i, ratio in enumerate(ratios)]
    assert report(verdicts, check) == status
    assert len(capsys.readouterr().out.splitlines()) == len(ratios) + (ratios == [None, None])


def test_interleaved_reverses_every_other_round():
    assert interleaved(["a", "b", "c"], 3) == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    with pytest.raises(ValueError, match="rounds must be >= 1, got 0"):
        interleaved(["a"], 0)


def test_seqtasks_target_is_feedback_over_transformer():
    # The run that printed "FAIL: feedback 850 tokens/s" against the old absolute target.
    (verdict,) = seqtasks.targets({"feedback": 850.0, "transformer": 1889.0, "lstm": 9000.0}, authors=False)
    assert verdict.passed and verdict.ratio == pytest.approx(0.45, abs=0.005)
    (verdict,) = seqtasks.targets({"feedback": 850.0}, authors=False)
    assert verdict.ratio is None and "--cores feedback transformer" in verdict.why_not


def test_seqtasks_authors_targets_are_ours_over_theirs_per_core():
    # The first side-by-side sitting: feedback 850 vs 734, transformer 1,888 vs 3,133 tokens/s.
    speed = {"feedback": 850.0, "transformer": 1888.0, "authors' feedback": 734.0, "authors' transformer": 3133.0}
    _, feedback, transformer = seqtasks.targets(speed, authors=True)
    assert not feedback.passed and feedback.ratio == pytest.approx(850 / 734) and feedback.at_least == 2.5
    assert not transformer.passed and transformer.ratio == pytest.approx(1888 / 3133) and transformer.at_least == 1.0
    _, feedback, transformer = seqtasks.targets({"feedback": 850.0, "authors' feedback": 734.0}, authors=True)
    assert feedback.ratio is not None and transformer.ratio is None and "--cores transformer" in transformer.why_not


def test_the_authors_code_is_refused_inside_this_repository(tmp_path):
    from benchmarks.authors import import_models

    with pytest.raises(FileNotFoundError, match="not a checkout of"):
        import_models(tmp_path)
    with pytest.raises(ValueError, match="must stay outside it"):
        import_models(Path(seqtasks.__file__).resolve().parent.parent / "runs" / "transformer-sequential")


def test_ffattn_target_is_chunked_over_dense_at_2000_steps():
    # updates/s of a run on the shared 2-core EPYC: dense 1.885 s/update, chunked 0.207 at L = 2,000
    (verdict,) = ffattn.targets({1000: 1 / 0.857, 2000: 1 / 1.885}, {1000: 1 / 0.113, 2000: 1 / 0.207})
    assert verdict.passed and verdict.ratio == pytest.approx(1.885 / 0.207)
    assert not ffattn.targets({2000: 1.0}, {2000: 3.9})[0].passed
    (verdict,) = ffattn.targets({}, {2000: 5.0})  # dense skipped there
    assert verdict.ratio is None and "--lengths 2000 with dense run there" in verdict.why_not


def test_cores_targets_are_speed_ratios_at_b_64_on_cpu():
    # docs/speed.md's CPU run at B = 64 (steps/s): feedback acting 6,700 and learning 2,294, the
    # naive reference 760 and 335, the transformer learning 6,994; B = 1 must not count.
    results = {
        ("feedback", 64): {"acting": 6700.0, "learning": 2294.0}, ("naive-feedback", 64): {"acting": 760.0, "learning": 335.0},
        ("transformer", 64): {"acting": 6306.0, "learning": 6994.0},
        ("feedback-cpu", 64): {"learning": 30000.0}, ("lstm-cpu", 64): {"learning": 60000.0},
        ("feedback", 1): {"acting": 1.0, "learning": 1.0}, ("naive-feedback", 1): {"acting": 1000.0, "learning": 1000.0},
    }
    acting, learning, against_transformer, cpu_preset = cores.targets(results, "cpu")
    assert acting.passed and acting.ratio == pytest.approx(6700 / 760) and acting.at_least == 5.0
    assert learning.passed and learning.ratio == pytest.approx(2294 / 335) and learning.at_least == 3.0
    assert not against_transformer.passed and against_transformer.ratio == pytest.approx(2294 / 6994)
    assert cpu_preset.passed and cpu_preset.ratio == pytest.approx(0.5) and cpu_preset.at_least == pytest.approx(1 / 3)
    results.update({("feedback-cpu", 64): {"learning": 19936.0}, ("lstm-cpu", 64): {"learning": 75343.0}})  # a run here: 0.26
    assert not cores.targets(results, "cpu")[3].passed
    assert cores.learning_step_lines(results)[0] == "feedback 27.90 ms a step, naive-feedback 191.04 ms a step"


def test_cores_targets_skip_what_was_not_measured_and_anything_off_the_cpu():
    results = {("feedback", 64): {"acting": 6700.0}, ("naive-feedback", 64): {"acting": 760.0}}  # learning skipped or failed
    acting, learning, *_ = cores.targets(results, "cpu")
    assert acting.passed
    assert learning.ratio is None and learning.why_not == "needs --cores feedback naive-feedback --sizes 64"
    on_gpu = cores.targets(results, "cuda")
    assert all(v.ratio is None and v.why_not == "the targets are for CPU (this run: --device cuda)" for v in on_gpu)


def test_distributed_targets_are_two_ranks_over_one_and_an_update_over_its_all_reduce():
    # docs/distributed.md's run: 8,504 and 8,441 frames/s; a 2.13 s update, all-reduces of 9.0 ms (feedback), 6.6 ms (LSTM)
    ranks, exchange = distributed_benchmark.targets({1: 8504.0, 2: 8441.0}, 2.13, {"feedback": 0.0090, "lstm": 0.0066})
    assert ranks.passed and ranks.ratio == pytest.approx(8441 / 8504) and ranks.at_least == 0.7
    assert exchange.passed and exchange.ratio == pytest.approx(2.13 / 0.0090) and exchange.at_least == 10.0
    ranks, exchange = distributed_benchmark.targets({1: 8504.0, 2: 5000.0}, 0.05, {"feedback": 0.0090, "lstm": 0.0001})
    assert not ranks.passed and not exchange.passed  # 0.59; 5.6 (the LSTM's all-reduce is not the one compared)


def test_envs_target_is_native_over_sync_on_the_maze_at_1024_envs():
    # docs/speed.md: the maze at N = 1,024, 3,966,838 against 16,697 env steps/s (237.6x)
    results = {("FeedbackRL/Maze-v0", 1024): (3966838.0, 16697.0), ("FeedbackRL/Maze-v0", 64): (1115188.0, 16682.0),
               ("FeedbackRL/Corridor-v0", 1024): (1.0, 1.0)}
    (verdict,) = envs_benchmark.targets(results)
    assert verdict.passed and verdict.ratio == pytest.approx(3966838 / 16697) and verdict.at_least == 50
    (verdict,) = envs_benchmark.targets({("FeedbackRL/Maze-v0", 1024): (49.0, 1.0)})
    assert not verdict.passed
    (verdict,) = envs_benchmark.targets({("FeedbackRL/Maze-v0", 64): (1115188.0, 16682.0)})
    assert verdict.ratio is None and verdict.why_not == "needs --envs maze --sizes 1024"


def test_a2c_targets_compare_within_the_run():
    fps = {"feedback": 2305.0, "transformer": 3127.0, "lstm": 4628.0, a2c.PEER: 4000.0}
    ours, peer = a2c.targets(fps, peer_missing="", sizes="paper")
    assert ours.passed and ours.ratio == pytest.approx(2305 / 3127)
    assert peer.passed and peer.ratio == pytest.approx(4628 / 4000)
    assert not a2c.targets({**fps, a2c.PEER: 5000.0}, "", "paper")[1].passed
    (cpu,) = a2c.targets({"feedback": 2305.0, "lstm": 4628.0}, "", sizes="cpu")  # the CPU preset: feedback against the LSTM
    assert not cpu.passed and cpu.ratio == pytest.approx(2305 / 4628)
    assert a2c.targets({"feedback": 3000.0, "lstm": 4628.0}, "", sizes="cpu")[0].passed  # 0.65 >= 0.6


def test_a2c_peer_target_is_skipped_without_sb3_contrib():
    _, peer = a2c.targets({"lstm": 4628.0}, peer_missing="sb3-contrib is not installed", sizes="paper")
    assert peer.ratio is None and peer.line().endswith("sb3-contrib is not installed")


def test_a2c_combine_sums_the_rounds():
    slices = [{"frames": 6400, "seconds": 1.0, "acting_s": 0.5, "threads": 1},
              {"frames": 12800, "seconds": 3.0, "acting_s": 1.0, "threads": 1}]
    assert a2c.combine(slices) == {"fps": 4800.0, "acting_share": 0.375, "threads": [1]}
    assert a2c.combine([slices[0], {"error": "boom"}]) == {"error": "boom"}


def test_a2c_bytes_moved_per_frame_sum_over_the_rounds():
    """Counted by the trainer's slices (bytes, not seconds); the peer's slices count none."""
    slices = [{"frames": 6400, "seconds": 1.0, "acting_s": 0.5, "threads": 1, "bytes_moved": 64_000},
              {"frames": 12800, "seconds": 3.0, "acting_s": 1.0, "threads": 1, "bytes_moved": 128_000}]
    combined = a2c.combine(slices)
    assert combined["bytes_per_frame"] == 10.0 and a2c.bytes_moved(combined) == "; 10 B"
    assert "bytes_per_frame" not in a2c.combine([{key: value for key, value in s.items() if key != "bytes_moved"} for s in slices])
    assert a2c.bytes_moved(a2c.combine(slices[:1] + [{**slices[1], "bytes_moved": 1_280_000}])) == "; 70 B"


def test_recurrent_ppo_env_reports_truncation_as_sb3_expects():
    pytest.importorskip("sb3_contrib", reason="the bench extra is not installed")
    from benchmarks.recurrent_ppo import NativeVecEnv

    env = NativeVecEnv("FeedbackRL/Maze-v0", num_envs=2, seed=0)
    obs = env.reset()
    steps = 0
    while True:  # maze episodes end by truncation only, after 200 steps
        env.step_async(np.zeros(2, dtype=np.int64))
        next_obs, reward, done, infos = env.step_wait()
        steps += 1
        if done.any():
            break
        obs = next_obs
    env.close()
    assert steps == 200 and done.all() and reward.dtype == np.float32
    for info in infos:
        assert info["TimeLimit.truncated"] is True
        assert info["terminal_observation"].shape == obs.shape[1:]


def test_a_floor_per_call_leaves_out_a_pause_that_the_mean_holds(monkeypatch):
    """A pause in one of the timed windows (here 30 ms in one call, as a scheduler's pause would
    be, on a clock the calls advance: no machine's speed enters) raises per_call's mean but not
    floor_per_call's least window."""
    clock = {"now": 0.0, "calls": 0}
    monkeypatch.setattr(targets, "time", SimpleNamespace(perf_counter=lambda: clock["now"]))

    def paused_once():
        clock["calls"] += 1
        clock["now"] += 0.03 if clock["calls"] == 3 else 1e-6  # the second timed call of the first window pauses

    assert per_call(paused_once, 0.01) >= 0.03 / 2  # the window ends after its pause: two calls at most
    clock["calls"] = 0
    floor = floor_per_call(paused_once, 0.05, repeats=5)
    assert floor < 0.03 / 100
    assert floor == pytest.approx(1e-6, rel=1e-3)  # a window without the pause; one mean over 0.05 s would hold it (2.5e-6)
