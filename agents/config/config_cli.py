"""Command-line flags from config dataclasses, shared by train_a2c.py and seqtasks.

Every field of a config dataclass becomes a flag (`learning_rate` -> `--learning-rate`) whose
default is "not given", so a run's config is: the dataclass defaults, then a preset, then only
what the user typed. Core options travel as repeated `--core-opt KEY=VALUE` (or comma separated),
typed by the chosen core's own defaults; env options as `--env-opt KEY=VALUE` (an int, a float
or a string, passed on to the env's constructor, which checks them).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, Callable

import torch

from agents.cores import core_options, run_options
from agents.runtime.device import resolve_device

_PARSERS = {int: int, float: float, str: str}


def add_config_arguments(parser: argparse.ArgumentParser, config_class: type, exclude: tuple[str, ...] = ()) -> None:
    """Add one flag per field of `config_class` (help from the field's `metadata['help']`; a
    field whose values are not one plain type names its parser as `metadata['parse']`)."""
    hints = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        if field.name in exclude:
            continue
        flag = flag_name(field.name)
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        help_text = f"{field.metadata.get('help', '')} (default: {default})".strip()
        kind = hints[field.name]
        if "parse" in field.metadata:
            parser.add_argument(flag, type=flag_type(field.metadata["parse"]), default=argparse.SUPPRESS, help=help_text,
                                metavar=field.name.upper())
        elif kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text)
        elif kind in _PARSERS:
            parser.add_argument(flag, type=_PARSERS[kind], default=argparse.SUPPRESS, help=help_text, metavar=field.name.upper())
        else:
            raise TypeError(f"config field {field.name} has type {kind}; flags support bool, int, float, str")


def flag_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse` as an argparse type: its ValueError's message becomes the usage error."""
    def typed(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    typed.__name__ = parse.__name__
    return typed


def flag_name(field: str) -> str:
    """The flag of a config field: learning_rate -> --learning-rate."""
    return "--" + field.replace("_", "-")


def given_fields(args: argparse.Namespace, config_class: type) -> dict[str, Any]:
    """The fields of `config_class` that were given on the command line."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(config_class) if hasattr(args, f.name)}


def parse_core_options(core: str, items: list[str]) -> dict[str, Any]:
    """Parse ['d_model=256', 'span=100,n_layers=2'] into typed options of core `core`."""
    defaults = core_options(core)
    options: dict[str, Any] = {}
    for _, key, text in _key_values(items, "core option", "KEY=VALUE"):
        key = key.replace("-", "_")
        if key not in defaults:
            raise ValueError(f"unknown option {key!r} for core {core!r}; it takes {sorted(defaults)}")
        options[key] = _typed(key, text, defaults[key])
    return options


def run_core_options(core: str, options: dict[str, Any], device: str, precision: str, saved: bool = False) -> dict[str, Any]:
    """Core `core`'s `options` as a run on `device` ('auto', 'cpu', 'cuda[:N]') at `precision`
    ('fp32', or 'bf16': bfloat16 autocast, agents/runtime/precision.py) builds it: with the
    choices made once, at the run's start, filled in (agents/cores/__init__.py: run_options;
    `saved`: options read from a checkpoint, chosen again where they cannot run here).
    ValueError for a choice that cannot be had there."""
    return run_options(core, options, resolve_device(device), torch.bfloat16 if precision == "bf16" else torch.float32, saved)


def core_line(core: str, options: dict[str, Any]) -> str:
    """A run's first log line: its core and the options it is built with, e.g.
    `core feedback: d_model=64, span=64, step=compiled`."""
    return f"core {core}" + (": " + ", ".join(f"{key}={value}" for key, value in options.items()) if options else "")


def parse_env_options(items: list[str]) -> dict[str, bool | int | float | str]:
    """Parse ['length=8,max_episode_steps=40', 'doors=fixed', 'expose_goal=true'] into env
    constructor options.

    A value is a bool if it reads true or false (any case), else an int if it reads as one, else
    a float if it reads as one, else the string as given. The env's constructor checks them: only
    it knows its options and what they allow.
    """
    options: dict[str, bool | int | float | str] = {}
    for _, key, text in _key_values(items, "env option", "KEY=VALUE"):
        options[key] = _number_or_text(text)
    return options


def _number_or_text(text: str) -> bool | int | float | str:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _key_values(items: list[str], what: str, form: str):
    """(item, key, value text) of each KEY=VALUE in repeated, comma-separated flag values."""
    for item in (part for entry in items for part in entry.split(",") if part):
        key, equals, text = item.partition("=")
        if not equals:
            raise ValueError(f"{what} {item!r} must look like {form}")
        yield item, key.strip(), text.strip()


def _typed(key: str, text: str, default: Any) -> Any:
    if isinstance(default, bool):
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"core option {key}={text!r}: expected true or false")
    for kind in (int, float):
        if isinstance(default, kind):
            try:
                return kind(text)
            except ValueError:
                raise ValueError(f"core option {key}={text!r}: expected {kind.__name__}") from None
    return text
