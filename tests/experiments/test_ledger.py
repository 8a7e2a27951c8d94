"""A sweep's ledger (experiments/frame/ledger.py): its finished runs' records kept in one file, so
that the sweep resumes on a machine without its run folders, trains nothing it finished, and
trains again a run it did not finish whole."""

import json
import cloudpickle
import shutil
import sys

import pytest

from experiments.frame.jobs import Job, run_jobs, train_job
from experiments.frame.ledger import Ledger
from experiments.frame.slurm import SlurmTask

WHOLE = ("job.done.json", "after.done.json")


def printing_job(folder, name: str, ledger: Ledger | None = None, line: str = "ran") -> Job:
    """A job whose command prints `line`, its record NAME.done.json in `folder`."""
    return Job(name, lambda: [sys.executable, "-c", f"print({line!r})"], folder / f"{name}.log", folder / f"{name}.done.json",
               "once", ledger=ledger)


def run_with_its_evaluation(runs, ledger: Ledger, seed: int) -> tuple[Job, Job]:
    job, after = printing_job(runs / f"seed{seed}", "job", ledger), printing_job(runs / f"seed{seed}", "after", ledger, line="evaluated")
    job.then = (after,)
    return job, after


def test_a_run_kept_whole_is_done_on_a_machine_without_its_folder(tmp_path):
    runs, path = tmp_path / "runs", tmp_path / "assets" / "sweep_runs.json"
    ledger = Ledger(path, runs, WHOLE)
    jobs = [run_with_its_evaluation(runs, ledger, seed) for seed in range(3)]
    run_jobs([job for job, _ in jobs], workers=2, what="test")
    assert all(after.result()["last_line"] == "evaluated" for _, after in jobs)  # each run's `then` job ran in its worker
    kept = json.loads(path.read_text())
    assert sorted(kept) == ["seed0", "seed1", "seed2"] and all(sorted(records) == sorted(WHOLE) for records in kept.values())

    shutil.rmtree(runs)  # another machine: the committed ledger, no run folders
    ledger = Ledger(path, runs, WHOLE)
    again = [run_with_its_evaluation(runs, ledger, seed) for seed in range(3)]
    assert ledger.runs() == 3 and all(job.done and after.done for job, after in again)
    run_jobs([job for job, _ in again], workers=2, what="test")
    assert not runs.exists()  # nothing ran: no log, no record written
    assert again[1][1].result() == kept["seed1"]["after.done.json"]


def test_a_run_kept_without_its_evaluation_trains_again(tmp_path):
    """Trained and not evaluated when the sweep stopped: on another machine there is no
    checkpoint to evaluate, so its training record alone does not count."""
    runs, path = tmp_path / "runs", tmp_path / "sweep_runs.json"
    ledger = Ledger(path, runs, WHOLE)
    job, after = run_with_its_evaluation(runs, ledger, 0)
    ledger.put(job.record, {"target": "once", "last_line": "ran"})
    assert ledger.get(job.record) is None and not job.done
    ledger.put(after.record, {"target": "once", "last_line": "evaluated"})
    assert job.done and after.done


def test_a_run_whose_evaluation_changed_trains_again_where_its_checkpoint_is_gone(tmp_path):
    """Kept whole, but an evaluation must run again (its target changed) on a machine without the
    run folder: nothing to evaluate, so the run trains again; where the checkpoint is there, or
    nothing needs it, the training stays done."""
    runs, path = tmp_path / "runs", tmp_path / "sweep_runs.json"
    ledger = Ledger(path, runs, WHOLE)
    job, after = run_with_its_evaluation(runs, ledger, 0)
    job.keeps = job.record.parent / "checkpoint.pt"
    ledger.put(job.record, {"target": "once", "last_line": "ran"})
    ledger.put(after.record, {"target": "an older evaluation", "last_line": "evaluated"})
    assert not after.done and not job.done
    run_jobs([job], workers=1, what="test")
    assert job.done and after.done and after.result()["target"] == "once"  # trained again, then evaluated

    kept, evaluated = run_with_its_evaluation(runs, ledger, 1)  # a run whose folder is here
    kept.keeps = kept.record.parent / "checkpoint.pt"
    ledger.put(kept.record, {"target": "once", "last_line": "ran"})
    ledger.put(evaluated.record, {"target": "an older evaluation", "last_line": "evaluated"})
    kept.keeps.parent.mkdir(parents=True)
    kept.keeps.write_bytes(b"a checkpoint")
    assert kept.done and not evaluated.done  # the evaluation alone runs again


def test_records_finished_before_the_ledger_go_into_it_and_it_is_rewritten_only_on_a_change(tmp_path):
    runs, path = tmp_path / "runs", tmp_path / "sweep_runs.json"
    ledger = Ledger(path, runs, WHOLE)
    job = printing_job(runs / "seed0", "job", ledger)
    run_jobs([job], workers=1, what="test")
    written = path.stat().st_mtime_ns
    job.keep()
    assert path.stat().st_mtime_ns == written  # the same record: not written again
    path.unlink()
    job.ledger = Ledger(path, runs, WHOLE)
    job.keep()  # what run_stages does first for every job: copy in what the run folder holds
    assert json.loads(path.read_text())["seed0"]["job.done.json"]["last_line"] == "ran"


def test_a_target_changed_since_the_ledger_trains_again(tmp_path):
    runs, path = tmp_path / "runs", tmp_path / "sweep_runs.json"
    ledger = Ledger(path, runs, ("train.done.json",))
    ledger.put(runs / "seed0" / "train.done.json", {"target": "1000 frames", "last_line": ""})
    assert train_job("run", runs / "seed0", ["--env", "corridor"], 1000).result() is None  # no ledger: the folder only
    job = train_job("run", runs / "seed0", ["--env", "corridor"], 2000)
    job.ledger = ledger
    assert job.result()["target"] == "1000 frames" and not job.done


@pytest.mark.parametrize("content", [b'{"seed0": {"train.done.json"', b"[]", b'{"seed0": 3}'], ids=["cut off", "a list", "a run not an object"])
def test_a_file_that_is_not_a_ledger_is_refused_by_name(tmp_path, content):
    path = tmp_path / "sweep_runs.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"{path} is not a ledger .* delete it to train its runs again"):
        Ledger(path, tmp_path / "runs", WHOLE)


def test_a_record_outside_the_runs_folder_is_refused(tmp_path):
    ledger = Ledger(tmp_path / "sweep_runs.json", tmp_path / "runs", WHOLE)
    with pytest.raises(ValueError, match="is not under the ledger's runs folder"):
        ledger.put(tmp_path / "elsewhere" / "job.done.json", {})


def test_a_slurm_task_carries_neither_the_ledger_nor_the_jobs_after_it(tmp_path):
    """The runner writes the ledger (nodes writing one file at once would lose records), and on
    Slurm a run's evaluations are a stage of their own; the task must also pickle (a lock does not)."""
    runs = tmp_path / "runs"
    job, _ = run_with_its_evaluation(runs, Ledger(tmp_path / "sweep_runs.json", runs, WHOLE), 0)
    task = cloudpickle.loads(cloudpickle.dumps(SlurmTask(job)))  # as submitit sends it
    assert task.job.ledger is None and task.job.then == () and task.job.record == job.record
    assert job.ledger is not None and len(job.then) == 1  # the runner's own job is untouched


def test_a_record_an_older_runner_wrote_is_kept_with_its_measures(tmp_path):
    """A run trained before records carried its training seconds: the ledger's copy gets them
    from the run folder while it is there, since on another machine it is not."""
    runs = tmp_path / "runs"
    job = printing_job(runs / "seed0", "job", Ledger(tmp_path / "sweep_runs.json", runs, ("job.done.json",)))
    job.record.parent.mkdir(parents=True)
    job.record.write_text('{"target": "once", "last_line": "ran"}\n')
    job.measure = lambda: {"training_seconds": 12.5}
    job.keep()
    assert job.ledger.get(job.record) == {"target": "once", "last_line": "ran", "training_seconds": 12.5}
    job.measure = lambda: pytest.fail("measured again")  # kept already: its event files are not read again
    job.keep()
    assert job.result()["training_seconds"] == 12.5  # read with its measures, though the run folder's record lacks them
    job.record.write_text('{"target": "once", "last_line": "ran again"}\n')
    assert job.result()["last_line"] == "ran again"  # a run folder's record the ledger does not hold is the one read
