"""A sweep's finished runs kept in one JSON file beside its results, so that a sweep stopped on
one machine goes on from another without its run folders.

A run folder holds each job's record (train.done.json, evaluate.done.json: experiments/frame/jobs.py)
beside the run's checkpoint and logs, and run folders are never committed (checkpoints never
are). A sweep that takes longer than one machine is lent for would start over on the next. The
ledger keeps a copy of every record of the sweep's runs, one line per run folder:

    {
    "lstm/L64/seed0": {"evaluate-sampled.done.json": {...}, "evaluate.done.json": {...}, "train.done.json": {...}},
    ...
    }

A job whose record is missing from its run folder is done if the ledger holds it at the same
target (`Job.result`), but only where the ledger holds the whole run, every record in `whole`:
a run trained and not yet evaluated has no checkpoint to evaluate on another machine, so it
trains again. Commit the ledger with the sweep's JSON; delete it to train the sweep again.
What needs a run's checkpoint (the memory probes, training on to a larger budget) needs the
run trained again where its folder is gone.

Only the experiment's own process writes the ledger (jobs that run as Slurm jobs write their
records on their nodes; the runner copies them in when their stage ends), each time whole and
atomically (durable/records.py).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from durable.records import read_record, write_text


class Ledger:
    """The records of the runs under `runs_dir`, kept in the file `path`; a run counts as kept
    when every record named in `whole` (file names in its folder) is."""

    def __init__(self, path: Path, runs_dir: Path, whole: tuple[str, ...]):
        self.path, self.runs_dir, self.whole = Path(path), Path(runs_dir), whole
        self._lock = threading.Lock()  # the local runner's worker threads keep records as they finish
        self._runs: dict[str, dict[str, dict]] = {}  # run folder (relative to runs_dir) -> {record file name: record}
        if self.path.exists():
            runs = read_record(self.path)
            if not isinstance(runs, dict) or not all(isinstance(records, dict) for records in runs.values()):
                raise ValueError(f"{self.path} is not a ledger (a JSON object of run folders, each an object of records); "
                                 "mend it from git, or delete it to train its runs again")
            self._runs = runs

    def _where(self, record: Path) -> tuple[str, str]:
        """(run folder relative to runs_dir, record file name) of a record's path."""
        try:
            folder = Path(record).parent.relative_to(self.runs_dir)
        except ValueError:
            raise ValueError(f"{record} is not under the ledger's runs folder {self.runs_dir}") from None
        return folder.as_posix(), Path(record).name

    def get(self, record: Path) -> dict | None:
        """The kept copy of the record at path `record`, or None if its run is not kept whole."""
        folder, name = self._where(record)
        with self._lock:
            records = self._runs.get(folder, {})
            return records.get(name) if all(kept in records for kept in self.whole) else None

    def holds(self, record: Path, value: dict) -> bool:
        """Whether the kept copy of the record at path `record` has every field of `value` as it is
        (and perhaps more: the measures a runner added), whole run or not."""
        folder, name = self._where(record)
        with self._lock:
            kept = self._runs.get(folder, {}).get(name)
        return kept is not None and all(kept.get(key) == field for key, field in value.items())

    def put(self, record: Path, value: dict) -> None:
        """Keep `value` as the record at path `record`, rewriting the file if that changes it."""
        folder, name = self._where(record)
        with self._lock:
            if self._runs.get(folder, {}).get(name) == value:
                return
            self._runs.setdefault(folder, {})[name] = value
            lines = [f"{json.dumps(run)}: {json.dumps(records, sort_keys=True)}" for run, records in sorted(self._runs.items())]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_text(self.path, "{\n" + ",\n".join(lines) + "\n}\n")

    def runs(self) -> int:
        """How many runs it keeps whole."""
        with self._lock:
            return sum(all(kept in records for kept in self.whole) for records in self._runs.values())
