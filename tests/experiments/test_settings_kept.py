"""A sweep never reuses runs made with other settings, and refuses bad training flags and paths
before it writes anything (experiments/frame/train_flags.py, Job.settings in experiments/frame/jobs.py)."""

import json
import sys

import pytest

from experiments.frame.jobs import JobFailed, train_job, write_json

QUICK = ["--quick", "--env", "memory_length", "--lengths", "3", "--models", "mlp", "--seeds", "2", "--eval-episodes", "2",
         "--frames", "64", "--jobs", "1", "--name", "settings"]


def sweep_argv(tmp_path, *more):
    return [*QUICK, "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), *more]


def test_a_sweep_called_again_with_other_train_args_is_refused_not_reused(tmp_path, monkeypatch, capsys):
    from experiments import memory_length

    monkeypatch.setattr(sys, "argv", ["memory_length"])
    memory_length.main(sweep_argv(tmp_path))
    before = (tmp_path / "out" / "settings.json").read_text()
    for flags, named in (("--learning-rate nan", "learning_rate must be a finite number > 0, got nan"),
                         ("--learning-rate 0.002", "was made with --train-args ''")):
        with pytest.raises(SystemExit) as exit_info:
            memory_length.main(sweep_argv(tmp_path, f"--train-args={flags}"))
        assert exit_info.value.code == 2 and named in capsys.readouterr().err
    assert (tmp_path / "out" / "settings.json").read_text() == before  # nothing rewritten, nothing reported under the new flags


@pytest.mark.parametrize("make, argv, named", [
    (lambda tmp: (tmp / "file").write_text("x"), lambda tmp: ["--runs-dir", str(tmp / "file" / "runs")], "is a file, not a folder"),
    (lambda tmp: (tmp / "file").write_text("x"), lambda tmp: ["--runs-dir", str(tmp / "file")], "is a file, not a folder"),
    (lambda tmp: (tmp / "folder").mkdir(), lambda tmp: ["--ledger", str(tmp / "folder")], "is a folder; give the path of a JSON file"),
    (lambda tmp: None, lambda tmp: ["--train-args", "'"], "--train-args \"'\": No closing quotation"),
    (lambda tmp: None, lambda tmp: ["--train-args", "--no-such-flag 3"], "unrecognized arguments: --no-such-flag 3"),
])
@pytest.mark.parametrize("runner", ["memory_length", "frames_to_solve"])
def test_bad_paths_and_flags_exit_2_before_anything_is_written(tmp_path, capsys, make, argv, named, runner):
    import importlib

    main = importlib.import_module(f"experiments.{runner}").main
    make(tmp_path)
    common = ["--quick", "--lengths", "2", "--models", "mlp", "--seeds", "2", "--name", "bad", "--out", str(tmp_path / "out")]
    given = argv(tmp_path)
    runs = [] if "--runs-dir" in given else ["--runs-dir", str(tmp_path / "runs")]
    with pytest.raises(SystemExit) as exit_info:
        main([*common, *runs, *given])
    assert exit_info.value.code == 2 and named in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_a_run_record_made_with_other_flags_is_not_the_jobs_and_its_checkpoint_is_not_resumed(tmp_path):
    run_dir = tmp_path / "run"
    job = train_job("run", run_dir, ["--env", "corridor", "--seed", "0"], 100)
    other = train_job("run", run_dir, ["--env", "corridor", "--seed", "0", "--learning-rate", "0.1"], 100)
    job.command()  # a new run: its flags are kept beside its folder
    run_dir.mkdir()
    write_json(job.record, {"target": job.target, "settings": list(job.settings), "last_line": ""})
    assert job.done and not other.done
    (run_dir / "checkpoint.pt").write_bytes(b"")
    assert "--resume" in job.command()
    with pytest.raises(JobFailed, match="was trained with other flags"):
        other.command()


def test_records_from_before_settings_were_kept_count_as_made_with_them(tmp_path):
    job = train_job("run", tmp_path / "run", ["--env", "corridor"], 100)
    write_json(job.record, {"target": job.target, "last_line": ""})  # a committed ledger's record from before
    assert job.done and json.loads(job.record.read_text()).get("settings") is None
