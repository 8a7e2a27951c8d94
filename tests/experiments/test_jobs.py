"""The experiment runner's records (experiments/frame/jobs.py, experiments/frame/slurm.py): a record that is
cut off or not JSON, as a crash or a full disk may leave one, counts as no record, so the job runs
again instead of the experiment crashing on it."""

import json
import sys

import pytest

from experiments.frame.jobs import Job, JobFailed, refuse_smaller_budget, run_jobs, seq_job, train_job
from experiments.frame.slurm import reattach, slurm_record

TRAIN_ARGS = ["--env", "corridor", "--core", "mlp", "--seed", "0"]
UNREADABLE = {"cut off": b'{"target": "10', "empty": b"", "not JSON": b"done", "not an object": b'["1000 frames"]',
              "not text": b"\xff\xfe{}"}


def printing_job(folder, line: str = "ran") -> Job:
    """A job whose command prints `line`: its record's last_line."""
    return Job("print", lambda: [sys.executable, "-c", f"print({line!r})"], folder / "job.log", folder / "job.done.json", "once")


@pytest.mark.parametrize("content", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_an_unreadable_record_counts_as_not_done(tmp_path, content):
    job = train_job("run", tmp_path, TRAIN_ARGS, 1000)
    job.record.write_bytes(content)
    assert job.result() is None and not job.done
    assert "--run-dir" in job.command()  # no checkpoint: it trains afresh; nothing is refused


def test_the_runner_runs_a_job_with_a_cut_off_record_again(tmp_path):
    job = printing_job(tmp_path)
    job.record.write_text('{"target": "on')
    run_jobs([job], workers=1, what="test")
    assert job.done and job.result()["last_line"] == "ran"
    assert json.loads(job.record.read_text())["target"] == "once"


def test_a_whole_record_at_the_target_is_done_and_not_run_again(tmp_path):
    job = printing_job(tmp_path)
    job.record.write_text('{"target": "once", "last_line": "kept"}\n')
    run_jobs([job], workers=1, what="test")
    assert job.done and job.result()["last_line"] == "kept" and not job.log.exists()


def test_a_seq_job_whose_results_are_cut_off_is_not_done(tmp_path):
    job = seq_job("run", tmp_path, ["--task", "copy"], 4)
    job.record.write_text('{"target": "4 updates"}\n')
    (tmp_path / "results.json").write_text('{"test": {"accura')
    assert not job.done  # resumed, the finished run writes its results.json again
    (tmp_path / "results.json").write_text('{"test": {"accuracy": 1.0}}\n')
    assert job.done


def test_a_traced_run_whose_trace_is_cut_off_is_not_done(tmp_path):
    job = train_job("run", tmp_path, TRAIN_ARGS, 1000, traced=True)
    job.record.write_text('{"target": "1000 frames"}\n')
    (tmp_path / "trace.json").write_text('{"probes": [')
    assert not job.done
    (tmp_path / "trace.json").write_text('{"probes": []}\n')
    assert job.done


def test_a_smaller_budget_is_refused_only_on_a_record_that_reads(tmp_path):
    record = tmp_path / "train.done.json"
    record.write_text('{"target": "3072 frames"}\n')
    with pytest.raises(JobFailed, match="already trained to 3,072 frames, more than the 2,048 asked for"):
        refuse_smaller_budget(record, 2048, "frames")
    record.write_text('{"target": "3072 fr')
    refuse_smaller_budget(record, 2048, "frames")  # says nothing: the checkpoint keeps the run's own count


def test_an_unreadable_slurm_record_names_no_job_to_wait_for(tmp_path):
    job = printing_job(tmp_path)
    slurm_record(job).write_text('{"job_id": "12')
    assert reattach([job]) == {}  # submitted again, instead of a crash


def test_a_job_started_again_after_a_kill_before_its_first_checkpoint_overwrites_only_its_own_folder(tmp_path):
    for job in (train_job("run", tmp_path, TRAIN_ARGS, 1000), seq_job("seq", tmp_path, ["--task", "copy"], 10)):
        assert "--overwrite" not in job.command()
    (tmp_path / "events.out.tfevents.1.killed").write_bytes(b"")  # the trainers refuse this folder without --overwrite
    for job in (train_job("run", tmp_path, TRAIN_ARGS, 1000), seq_job("seq", tmp_path, ["--task", "copy"], 10)):
        assert job.command()[-1] == "--overwrite"


def test_a_job_log_that_is_a_link_is_refused_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("kept\n")
    job = printing_job(tmp_path / "run")
    job.log.parent.mkdir()
    job.log.symlink_to(victim)
    with pytest.raises(JobFailed, match="job.log is a symbolic link"):
        run_jobs([job], workers=1, what="test")
    assert victim.read_text() == "kept\n" and not job.done
