"""The tuner (experiments/tune.py, experiments/frame/study.py): a study on a cheap objective
resumes after SIGKILL with its finished trials kept and its stopped trial retried in the same run
folders; the median pruner stops the worst trial; unequal budgets are refused; a settings file the
tuner wrote trains to the same first update as the same flags given by hand; evaluation seeds
differ from training's; a whole quick study end to end, run twice."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import optuna
import pytest

import train_ppo
from agents.config.a2c_config import A2CConfig
from agents.config.ppo_config import PPOConfig
from agents.config.search_space import Search, narrowed
from agents.config.settings_file import read_settings
from agents.cores.lstm import LSTMConfig
from agents.cores.recurrent import RecurrentConfig
from agents.runtime.checkpoint import load_checkpoint
from agents.runtime.seeding import env_seeds
from experiments import tune
from experiments.frame.jobs import EVAL_SEED, ROOT
from experiments.frame.study import BudgetMismatch, StudyBusy, held, open_study, retry_stopped, run_trials, runs_of
from tests.trained import assert_same_parameters
from tests.launch import wait_until

SPACE = {"x": Search(0.0, 10.0), "k": Search(choices=(1, 2, 4))}
BUDGET = {"frames": 200_000, "seeds": [0, 1], "trials": 5, "space": {name: search.to_dict() for name, search in SPACE.items()}}

# A tuner on a cheap objective, in a process of its own: trial 2 of its first life blocks (having
# said so in a file) until it is killed; every other trial scores -(x - 3)^2 at once.
STUDY_SCRIPT = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    from experiments.frame.study import open_study, resume, run_trials, runs_of
    from tests.experiments.test_tune import BUDGET, SPACE

    folder, storage, block = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "block"
    study = open_study(folder, storage, BUDGET)
    print(resume(study, 5), flush=True)

    def objective(trial, values):
        (folder / f"ran-{runs_of(trial)}").touch()
        if block and trial.number == 2:
            (folder / "blocked").touch()
            threading.Event().wait()  # until the test kills this process
        return -(values["x"] - 3.0) ** 2

    run_trials(study, SPACE, 5, objective)
""")


@pytest.mark.parametrize("storage", ["sqlite", "journal"])
def test_a_study_killed_mid_trial_resumes_with_its_finished_trials_and_retries_the_stopped_one(tmp_path, storage):
    script = tmp_path / "study.py"
    script.write_text(STUDY_SCRIPT)
    folder = tmp_path / "study"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID"):
        env.pop(name, None)
    first = subprocess.Popen([sys.executable, str(script), str(folder), storage, "block"], env=env, stdout=subprocess.PIPE, text=True)
    assert wait_until((folder / "blocked").exists, first, timeout=60.0), f"{folder / 'blocked'} did not appear: {first.communicate()}"
    first.send_signal(signal.SIGKILL)
    first.wait()

    study = open_study(folder, storage, BUDGET)
    before = {trial.number: (trial.state, trial.value, trial.params) for trial in study.get_trials()}
    assert [state for state, _, _ in before.values()] == [optuna.trial.TrialState.COMPLETE] * 2 + [optuna.trial.TrialState.RUNNING]

    second = subprocess.run([sys.executable, str(script), str(folder), storage, "go"], env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == "2 finished trials found (0 pruned), 1 stopped trial queued again; 3 to run"
    trials = open_study(folder, storage, BUDGET).get_trials()
    for number in (0, 1):  # the finished trials are kept as they were
        assert (trials[number].state, trials[number].value, trials[number].params) == before[number]
    assert trials[2].state == optuna.trial.TrialState.FAIL and trials[2].user_attrs["stopped"]
    retry = trials[3]
    assert retry.params == before[2][2] and runs_of(retry) == 2 and retry.state == optuna.trial.TrialState.COMPLETE
    assert sum(trial.state == optuna.trial.TrialState.COMPLETE for trial in trials) == 5
    assert sorted(path.name for path in folder.glob("ran-*")) == ["ran-0", "ran-1", "ran-2", "ran-4", "ran-5"]  # the retry reused 2's


def test_a_worker_retries_only_the_trials_it_left_running(tmp_path, monkeypatch):
    study = open_study(tmp_path / "study", "sqlite", BUDGET)
    for worker in ("slurm:7_0", "slurm:7_1"):
        trial = study.ask()
        trial.set_user_attr("worker", worker)
        trial.suggest_float("x", 0.0, 10.0)
    assert retry_stopped(study, "slurm:7_1") == 1  # 7_0 is another worker's, still running
    states = [trial.state for trial in study.get_trials()]
    assert states == [optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "7")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    run_trials(study, {"x": Search(0.0, 10.0)}, 1, lambda trial, values: 1.0)  # 7_0 running counts toward the budget
    assert study.get_trials()[-1].user_attrs == {"worker": "slurm:7_0", "runs_of": 1, "surplus": True}


def test_the_median_pruner_stops_the_trial_whose_intermediate_values_are_worst(tmp_path):
    study = open_study(tmp_path / "study", "sqlite", BUDGET)
    reported = {}

    def objective(trial, values):
        curve = [-5.0, -5.0, -5.0] if trial.number == 6 else [trial.number, trial.number + 1.0, trial.number + 2.0]
        for step, value in enumerate(curve, start=1):
            trial.report(value, step)
            reported.setdefault(trial.number, []).append(step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return curve[-1]

    run_trials(study, SPACE, 8, objective, say=lambda line: None)
    states = [trial.state for trial in study.get_trials()]
    assert states[6] == optuna.trial.TrialState.PRUNED and reported[6] == [1]  # stopped after its first evaluation
    assert states.count(optuna.trial.TrialState.PRUNED) == 1 and states.count(optuna.trial.TrialState.COMPLETE) == 7


def test_a_study_opened_with_another_budget_or_storage_is_refused(tmp_path):
    folder = tmp_path / "lstm"
    open_study(folder, "sqlite", BUDGET)
    open_study(folder, "sqlite", json.loads(json.dumps(BUDGET)))  # the same budget, as the storage gives it back
    with pytest.raises(BudgetMismatch, match=r"frames 200000, now 100000.*Equal budgets or none"):
        open_study(folder, "sqlite", {**BUDGET, "frames": 100_000})
    with pytest.raises(BudgetMismatch, match=r"space.x.high 10.0, now 5.0"):
        open_study(folder, "sqlite", {**BUDGET, "space": {**BUDGET["space"], "x": Search(0.0, 5.0).to_dict()}})
    with pytest.raises(BudgetMismatch, match=r"kept in study.db \(sqlite\); this call asks for journal"):
        open_study(folder, "journal", BUDGET)


def test_the_command_line_refuses_a_core_whose_study_has_another_budget(tmp_path, capsys):
    """gru's study, made by an earlier call with other frames, is checked even when this call
    tunes lstm only: every study of a name at one budget."""
    open_study(tmp_path / "runs" / "gru", "sqlite", {"frames": 1})
    with pytest.raises(SystemExit) as exit_info:
        tune.main(["--quick", "--cores", "lstm", "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "the study in" in capsys.readouterr().err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, message", [
    (["--space", "momentum=0.9"], "'momentum' is not searched; the space is"),
    (["--space", "learning_rate=1e-4,x"], "learning_rate: 'x' is not a float"),
    (["--space", "rollout=8:64"], "rollout is searched over choices"),
    (["--train-args", "--seed 3"], "--train-args may not give --seed"),
    (["--cores", "lstm", "lstm"], "'lstm' is given twice"),
    (["--cores", "lstm:span=4"], "unknown option 'span' for core 'lstm'"),
    (["--seeds", "1"], "must be at least 2"),
    (["--env", "mazee"], "mazee"),
    (["--train-args", "--gamma 2"], "gamma must be"),
])
def test_bad_tuner_arguments_exit_2_naming_the_value(tmp_path, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tune.main(["--quick", "--cores", "lstm", "--runs-dir", str(tmp_path), "--out", str(tmp_path / "out"), *argv])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_a_narrowed_space_keeps_the_scale_takes_choices_and_fixes_values():
    space, fixed = narrowed(PPOConfig.search_space, ["learning_rate=1e-4:1e-3", "rollout=16,32", "gamma=0.99", "update-epochs=2:4"])
    assert space["learning_rate"] == Search(1e-4, 1e-3, log=True)
    assert space["rollout"] == Search(choices=(16, 32)) and space["update_epochs"] == Search(2, 4, integer=True)
    assert fixed == {"gamma": 0.99} and "gamma" not in space
    assert set(A2CConfig.search_space) < set(PPOConfig.search_space)


def test_every_search_space_setting_is_a_field_of_its_config_with_values_it_accepts():
    """A setting the space names but the config lacks (or refuses at its range's ends) would fail
    every trial at its first run."""
    for config_class in (A2CConfig, PPOConfig):
        for name, search in config_class.search_space.items():
            values = search.choices or (search.low, search.high)
            for value in values:
                config_class(**{name: int(value) if search.integer else value})


def test_a_settings_file_for_the_other_trainer_or_with_unknown_fields_is_refused(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"trainer": "train_ppo.py", "settings": {"update_epochs": 2}}))
    with pytest.raises(ValueError, match="holds settings for train_ppo.py; give it to that script, not train_a2c.py"):
        read_settings(path, A2CConfig, "train_a2c.py")
    path.write_text(json.dumps({"trainer": "train_ppo.py", "settings": {"momentum": 0.9, "rollout": 8}}))
    with pytest.raises(ValueError, match="momentum is not a setting of train_ppo.py"):
        read_settings(path, PPOConfig, "train_ppo.py")


def test_a_quick_study_end_to_end_resumes_and_its_settings_train_as_the_flags_do(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    argv = ["--quick", "--algo", "ppo", "--cores", "lstm", "--trials", "1", "--seeds", "2", "--chunks", "2", "--fresh-seeds", "2",
            "--frames", "1024", "--env-opt", "length=2", "--train-args", "--bptt episode --no-previous-inputs", "--space", "rollout=8,16",
            "--name", "tq", "--runs-dir", str(runs), "--out", str(out), "--jobs", "2"]
    tune.main(argv)
    summary = json.loads((out / "tq.json").read_text())
    model = summary["models"]["lstm"]
    assert model["finished"] == 1 and [trial["state"] for trial in model["trials"]] == ["COMPLETE"]
    assert all(sorted(trial["intermediate"]) == ["1", "2"] for trial in model["trials"])  # a value after each chunk
    assert set(model["best"]["params"]) == set(PPOConfig.search_space) - {"bptt", "num_minibatches"}  # fixed by --train-args, --quick
    assert [run["seed"] for run in model["fresh"]["tuned"]["per_seed"]] == [100, 101] == summary["fresh_seeds"]
    assert summary["budget"]["seeds"] == [0, 1] and summary["budget"]["space"]["rollout"]["choices"] == [8, 16]
    assert (out / "tq" / "lstm-history.png").stat().st_size > 0 and "| lstm | 1 (0 pruned) |" in (out / "tq.md").read_text()
    for kind in ("tuned", "preset"):  # the table gives each fresh seed's value, as the JSON has it
        assert ", ".join(f"{run['success']:.2f}" for run in model["fresh"][kind]["per_seed"]) in (out / "tq.md").read_text()

    # evaluation streams are never training's: neither the trials' seeds' nor the fresh seeds'
    evaluations = [json.loads(path.read_text())["command"] for path in runs.glob("lstm/*/seed*/evaluate*.done.json")]
    assert evaluations and all(command[command.index("--seed") + 1] == str(EVAL_SEED) for command in evaluations)
    evaluation_streams = set(env_seeds(EVAL_SEED, range(4), "evaluation"))
    for seed in [*summary["budget"]["seeds"], *summary["fresh_seeds"]]:
        assert not evaluation_streams & set(env_seeds(seed, range(4), "training"))
    assert not set(summary["budget"]["seeds"]) & set(summary["fresh_seeds"])

    capsys.readouterr()
    tune.main(argv)  # again: everything is found done, nothing trains
    said = capsys.readouterr().out
    assert "study lstm: 1 finished trials found (0 pruned); 0 to run" in said and "training" not in said

    # the best settings file trains to the same first update as the same flags typed by hand
    settings = json.loads((out / "tq" / "lstm.json").read_text())["settings"]
    assert {"gate_init", "t_max"} <= set(settings["core_options"])  # named, so the next default changes nothing it trains
    flags = []
    for key, value in settings.items():
        if key.endswith("_options"):
            flags += [f"--{key[:-len('_options')]}-opt", ",".join(f"{k}={v}" for k, v in value.items())]
        elif isinstance(value, bool):
            flags.append(f"--{'' if value else 'no-'}{key.replace('_', '-')}")
        else:
            flags += [f"--{key.replace('_', '-')}", str(value)]
    one_update = ["--seed", "5", "--total-steps", str(settings["num_envs"] * settings["rollout"]), "--threads", "1"]
    train_ppo.main(["--config", str(out / "tq" / "lstm.json"), *one_update, "--run-dir", str(tmp_path / "file")])
    train_ppo.main([*flags, *one_update, "--run-dir", str(tmp_path / "flags")])
    by_file, by_flags = (load_checkpoint(tmp_path / name, "ppo") for name in ("file", "flags"))
    assert by_file["config"] == {**by_flags["config"], "run_dir": by_file["config"]["run_dir"]}
    assert_same_parameters(by_file["policy"], by_flags["policy"])
    assert by_file["counters"]["updates"] == by_flags["counters"]["updates"] == 1


def test_the_slowest_corner_is_the_fewest_new_steps_the_longest_window_and_the_most_epochs():
    """The tuner's second estimate trains at this corner, the slow end of the settings that set a
    run's speed (a window of 128 over rollouts of 8 recomputes 16 steps for each new one)."""
    assert tune.slowest_corner(A2CConfig.search_space) == {"rollout": 8, "bptt": 128}
    assert tune.slowest_corner(PPOConfig.search_space) == {"rollout": 8, "bptt": 128, "update_epochs": 8}
    space, fixed = narrowed(PPOConfig.search_space, ["bptt=0", "rollout=16,32", "update_epochs=2:5"])
    assert tune.slowest_corner(space) == {"rollout": 16, "update_epochs": 5} and fixed == {"bptt": 0}


def test_the_estimate_times_the_preset_and_the_slowest_corner(tmp_path, monkeypatch):
    """Before a search, the tuner estimates its runs twice, each timing the runs it has left: at
    the preset's settings, then at the slowest corner of the space searched."""
    estimated = []

    class Estimated(Exception):
        pass

    def record(jobs, workers):
        estimated.append([job.work[1] for job in jobs])
        if len(estimated) == 2:
            raise Estimated

    monkeypatch.setattr(tune, "print_expected_time", record)
    with pytest.raises(Estimated):
        tune.main(["--cores", "lstm", "--trials", "1", "--seeds", "2", "--env-opt", "length=2", "--space", "rollout=16,32",
                   "--name", "te", "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    preset = str(tmp_path / "runs" / "lstm" / "preset.json")
    assert estimated[0] == [["--config", preset]] * 2  # 1 trial of 2 seeds left
    assert estimated[1] == [["--config", preset, "--rollout", "16", "--bptt", "128"]] * 2


def test_the_settings_name_every_default_that_has_changed():
    """A study's settings (what its files train) name the recurrent cores' initialisation, given
    or not: a best-settings file of an LSTM without it trained torch's biases before 2026-11-27,
    chrono's until 2026-12-06 and torch's since. Other cores' options are as given."""
    settings = lambda text: tune.model_settings({}, tune.model_of(text), [], quick=False)["core_options"]  # noqa: E731
    assert settings("lstm") == {"gate_init": LSTMConfig.gate_init, "t_max": LSTMConfig.t_max}
    assert settings("gru:gate_init=chrono") == {"gate_init": "chrono", "t_max": RecurrentConfig.t_max}
    assert settings("lstm:gate_init=pytorch,t_max=50") == {"gate_init": "pytorch", "t_max": 50}
    assert settings("feedback:span=16") == {"span": 16}


def test_a_study_held_by_one_tuner_is_refused_to_another(tmp_path):
    with held(tmp_path / "study"):
        with pytest.raises(StudyBusy, match=rf"another tuner is running the study in .*study \(process {os.getpid()}\)"):
            with held(tmp_path / "study"):
                pass
    with held(tmp_path / "study"):  # released when the first one is done
        pass
