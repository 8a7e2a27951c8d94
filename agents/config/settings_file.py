"""Settings files: a run's config fields in a JSON file that `train_a2c.py --config FILE` and
`train_ppo.py --config FILE` take, as `python -m experiments.tune` writes its best settings.

    {"trainer": "train_ppo.py",
     "settings": {"env": "tmaze", "core": "lstm", "learning_rate": 0.0007, "bptt": "episode",
                  "core_options": {"hidden_size": 128}, "env_options": {"length": 16}},
     "source": "experiments.tune: study tune_tmaze, model lstm, trial 17 (greedy success 0.98)"}

The file's settings are read as if typed on the command line before every other flag: the flags
given beside `--config` win, and `--core-opt` / `--env-opt` are merged over the file's options.
A file for the other trainer, or one naming a field its trainer does not have, is refused with
the field named.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from durable.records import write_json


def read_settings(path: str | Path, config_class: type, trainer: str) -> dict[str, Any]:
    """The settings of the file at `path` for `trainer` ("train_a2c.py" or "train_ppo.py",
    whose config dataclass is `config_class`); a ValueError says what is wrong with it."""
    try:
        content = json.loads(Path(path).read_text())
    except OSError as error:
        raise ValueError(f"--config {path}: cannot read it ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"--config {path}: not JSON ({error})") from None
    if not isinstance(content, dict) or not isinstance(content.get("settings"), dict):
        raise ValueError(f"--config {path}: expected an object with \"settings\" (and \"trainer\"), got {type(content).__name__}")
    if content.get("trainer", trainer) != trainer:
        raise ValueError(f"--config {path} holds settings for {content['trainer']}; give it to that script, not {trainer}")
    settings = content["settings"]
    fields = {field.name for field in dataclasses.fields(config_class)}
    unknown = sorted(set(settings) - fields)
    if unknown:
        raise ValueError(f"--config {path}: {', '.join(unknown)} {'is not a setting' if len(unknown) == 1 else 'are not settings'} "
                         f"of {trainer}; its settings are {sorted(fields)}")
    for key in ("core_options", "env_options"):
        if not isinstance(settings.get(key, {}), dict):
            raise ValueError(f"--config {path}: {key} must be an object of KEY: VALUE, got {settings[key]!r}")
    return settings


def write_settings(path: str | Path, trainer: str, settings: dict[str, Any], source: str) -> None:
    """Write `settings` (config fields, core_options and env_options as dicts) for `trainer`,
    atomically, with `source` saying where they come from."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json(Path(path), {"trainer": trainer, "settings": settings, "source": source}, indent=1)
