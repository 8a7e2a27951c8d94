"""An Optuna study kept in its folder, run to a fixed number of trials, resumable at any point.

Storage (`open_study`): Optuna's RDB storage on SQLite (`study.db`) for a tuner on one machine,
its journal file storage (`study.journal`, appended with file locks) for Slurm workers sharing a
cluster's disk. The study's budget (frames, seeds, trials, space, ...) is saved in it when it is
made; opening it with another budget is refused (`BudgetMismatch`), so no trial of a study, and
no study of a comparison, gets more search than another.

Trials (`run_trials`): ask, run the objective, tell, until the study holds `trials` finished ones
(completed or pruned). Each trial records which worker runs it ("local", or the Slurm job). A
worker that is stopped (Ctrl-C, SIGTERM, a Slurm time limit, SIGKILL) leaves its trial marked
running; when the same worker starts again it marks that trial failed and queues its settings
again, with `runs_of` naming the first trial's number, so the retry trains in the same run
folders and resumes their checkpoints: no finished trial and no finished training is lost. A
local tuner holds `study.lock` while it runs, so no other process shares its trials; the lock
follows no link (durable/owned_files.py), so a study folder someone handed over cannot make the
tuner write outside it.

Pruning: Optuna's median pruner; an objective reports an intermediate value per chunk of
training (`trial.report`) and raises optuna.TrialPruned when `trial.should_prune()`.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import optuna
from optuna.trial import TrialState

from agents.config.search_space import Search
from durable.owned_files import Busy, NotOurFile, hold_lock

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
optuna.logging.set_verbosity(optuna.logging.WARNING)  # the tuner says what happens itself, once per trial
STARTUP_TRIALS = 5  # the median pruner prunes nothing before this many trials have finished (Optuna's default)
MAX_FAILURES = 10  # objective errors (not stops) after which a study gives up: a broken setup, not a bad setting


class BudgetMismatch(ValueError):
    """A study opened with a budget other than the one it was made with."""


class StudyBusy(RuntimeError):
    """The study cannot be held (`held`): another process holds it, or its lock is not a file of ours."""


class SetupError(RuntimeError):
    """An objective's error that no setting causes (the env lacks the objective's quantity): it
    ends the search rather than failing one trial after another."""


def worker_name() -> str:
    """Who runs a trial: "slurm:JOB" inside a Slurm job (an array task's id stays the same when
    it is requeued), else "local"."""
    if "SLURM_ARRAY_JOB_ID" in os.environ:
        return f"slurm:{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', '0')}"
    if "SLURM_JOB_ID" in os.environ:
        return f"slurm:{os.environ['SLURM_JOB_ID']}"
    return "local"


def storage_for(folder: Path, kind: str) -> optuna.storages.BaseStorage:
    """The study's storage in `folder`: "sqlite" (study.db) or "journal" (study.journal). Opening
    a study with the other kind than it was made with is refused (it would start an empty one)."""
    files = {"sqlite": folder / "study.db", "journal": folder / "study.journal"}
    if kind not in files:
        raise ValueError(f"unknown storage {kind!r}; choose from {sorted(files)}")
    other = next(name for name in files if name != kind)
    if files[other].exists() and not files[kind].exists():
        raise BudgetMismatch(f"the study in {folder} is kept in {files[other].name} ({other}); this call asks for {kind} "
                             f"(--launcher local keeps sqlite, --launcher slurm journal): run it the way it was made")
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        return optuna.storages.RDBStorage(f"sqlite:///{files['sqlite']}")
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(str(files["journal"])))


def open_study(folder: Path, kind: str, budget: dict[str, Any], seed: int = 0) -> optuna.Study:
    """The study in `folder` (made there, maximising, if there is none), checked against `budget`
    (a JSON-able dict saved as the study's user attributes when it is made); TPE sampler seeded
    by `seed`, median pruner."""
    study = optuna.create_study(
        storage=storage_for(folder, kind), study_name=folder.name, direction="maximize", load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=seed), pruner=optuna.pruners.MedianPruner(n_startup_trials=STARTUP_TRIALS),
    )
    budget = json.loads(json.dumps(budget))  # as the storage gives it back: tuples as lists
    saved = study.user_attrs.get("budget")
    if saved is None:
        study.set_user_attr("budget", budget)
    elif saved != budget:
        changes = "; ".join(f"{key} {old!r}, now {new!r}" for key, old, new in differences(saved, budget))
        raise BudgetMismatch(f"the study in {folder} was made with another budget: {changes}. "
                             "Equal budgets or none: give another --name for a new study")
    return study


def differences(old: dict, new: dict, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(key, old value, new value) of every value that differs, nested keys as a.b."""
    found = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append((f"{prefix}{key}", a, b))
    return found


@contextmanager
def held(folder: Path) -> Iterator[None]:
    """Hold the study in `folder` for this process (study.lock); another holder is refused, and
    so is a study.lock that is a link, a folder or a pipe."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        lock = hold_lock(folder / "study.lock")
    except Busy as busy:
        raise StudyBusy(f"another tuner is running the study in {folder} (process {busy.holder}); wait for it or stop it") from None
    except NotOurFile as error:
        raise StudyBusy(f"the study in {folder} cannot be locked: {error}") from None
    try:
        yield
    finally:
        lock.release()


def finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The study's completed and pruned trials."""
    return study.get_trials(deepcopy=False, states=FINISHED)


def retry_stopped(study: optuna.Study, worker: str) -> int:
    """Mark this worker's trials left running (it was stopped) failed and queue their settings
    again, with `runs_of` (the first trial's number) so the retry reuses their run folders.
    Returns how many were queued again."""
    stopped = [trial for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
               if trial.user_attrs.get("worker") == worker]
    for trial in stopped:
        study._storage.set_trial_user_attr(trial._trial_id, "stopped", True)
        study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
        study.enqueue_trial(trial.params, user_attrs={"runs_of": runs_of(trial)}, skip_if_exists=False)
    return len(stopped)


def resume(study: optuna.Study, trials: int) -> str:
    """Take up `study` where it was left (`retry_stopped` for this worker) and say what was found:
    "12 finished trials found (3 pruned), 1 stopped trial queued again; 18 to run"."""
    retried = retry_stopped(study, worker_name())
    done = finished(study)
    pruned = sum(trial.state == TrialState.PRUNED for trial in done)
    again = f", {retried} stopped trial{'s' if retried > 1 else ''} queued again" if retried else ""
    return f"{len(done)} finished trials found ({pruned} pruned){again}; {max(0, trials - len(done))} to run"


def runs_of(trial: optuna.trial.BaseTrial) -> int:
    """The number of the trial whose run folders this trial trains in: its own, or the first
    trial's where it retries a stopped one."""
    return trial.user_attrs.get("runs_of", trial.number)


def suggest(trial: optuna.trial.Trial, space: dict[str, Search]) -> dict[str, Any]:
    """A value of each setting in `space`, from the study's sampler."""
    values = {}
    for name, search in space.items():
        if search.choices:
            values[name] = trial.suggest_categorical(name, list(search.choices))
        elif search.integer:
            values[name] = trial.suggest_int(name, int(search.low), int(search.high), log=search.log)
        else:
            values[name] = trial.suggest_float(name, search.low, search.high, log=search.log)
    return values


def run_trials(study: optuna.Study, space: dict[str, Search], trials: int,
               objective: Callable[[optuna.trial.Trial, dict[str, Any]], float], say: Callable[[str], None] = print) -> None:
    """Run trials until `study` has `trials` finished ones: each asks the sampler for a value of
    every setting in `space` and gets `objective(trial, values)` (which reports intermediate
    values and may raise optuna.TrialPruned). A trial that would take the study past `trials`
    (another worker asked first) is failed unrun. An objective's error fails its trial and the
    search goes on, up to MAX_FAILURES; a stop signal (KeyboardInterrupt) leaves the trial running,
    for `retry_stopped` when the worker comes back."""
    worker = worker_name()
    failures = 0
    while len(finished(study)) < trials:
        trial = study.ask()
        trial.set_user_attr("worker", worker)
        ahead = [other for other in study.get_trials(deepcopy=False)
                 if other.number < trial.number and other.state in (*FINISHED, TrialState.RUNNING)]
        if len(ahead) >= trials:
            trial.set_user_attr("surplus", True)
            study.tell(trial, state=TrialState.FAIL)
            return
        values = suggest(trial, space)
        try:
            value = objective(trial, values)
        except SetupError:
            trial.set_user_attr("error", "setup error; see the tuner's output")
            study.tell(trial, state=TrialState.FAIL)
            raise
        except optuna.TrialPruned:
            study.tell(trial, state=TrialState.PRUNED)
            say(f"trial {trial.number}: pruned at step {study._storage.get_trial(trial._trial_id).last_step}")
            continue
        except Exception as error:  # noqa: BLE001 - the trial fails, and says why; the search goes on
            trial.set_user_attr("error", str(error)[-2000:])
            study.tell(trial, state=TrialState.FAIL)
            failures += 1
            say(f"trial {trial.number}: failed: {str(error)[-500:]}")
            if failures >= MAX_FAILURES:
                raise RuntimeError(f"{failures} trials failed in this call; the last error: {error}") from error
            continue
        study.tell(trial, value)
        say(f"trial {trial.number}: {value:.4g} ({len(finished(study))} of {trials} finished)")
