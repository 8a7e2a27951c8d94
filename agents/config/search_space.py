"""The settings a tuner may search, each with its range and scale, declared beside the config
dataclass they belong to (A2CConfig.search_space, PPOConfig.search_space) and narrowed from the
command line (`--space learning_rate=1e-4:1e-3`, `--space rollout=16,32`, `--space gamma=0.99`).

A `Search` is one setting's space: a range from `low` to `high` (on a log scale where `log`;
whole numbers where `integer`), or a list of `choices`. It says nothing about how it is sampled:
experiments/frame/study.py asks Optuna for a value of each.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Search:
    """One setting's space: low..high (log scale where `log`, integers where `integer`) or `choices`."""

    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: tuple[Any, ...] = ()

    def __post_init__(self):
        if self.choices:
            if self.low is not None or self.high is not None or self.log or self.integer:
                raise ValueError(f"a search over choices {list(self.choices)} takes no range, scale or integer flag")
            return
        if self.low is None or self.high is None or not self.low < self.high:
            raise ValueError(f"a search range needs low < high, got {self.low} .. {self.high}")
        if self.log and self.low <= 0:
            raise ValueError(f"a log-scale search range must start above 0, got {self.low} .. {self.high}")
        if self.integer and (self.low != int(self.low) or self.high != int(self.high)):
            raise ValueError(f"an integer search range needs whole ends, got {self.low} .. {self.high}")

    def describe(self) -> str:
        """"1e-05 .. 0.01 (log)", "one of 8, 16, 32": for a study's output."""
        if self.choices:
            return "one of " + ", ".join(str(choice) for choice in self.choices)
        scale = "log" if self.log else "linear"
        return f"{self.low:g} .. {self.high:g} ({'integers, ' if self.integer else ''}{scale})"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def narrowed(space: dict[str, Search], items: list[str]) -> tuple[dict[str, Search], dict[str, Any]]:
    """(the space, fixed settings) after the `--space` items: NAME=LOW:HIGH narrows a range
    (keeping its scale), NAME=A,B,C takes those choices, NAME=VALUE fixes the setting (it is no
    longer searched; it goes into every trial as given). A ValueError names an unknown setting,
    a value that does not parse as the setting's type, or a range given for a list of choices."""
    space, fixed = dict(space), {}
    for item in items:
        name, equals, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or not text.strip():
            raise ValueError(f"--space {item!r} must look like NAME=LOW:HIGH, NAME=A,B or NAME=VALUE")
        if name not in space:
            raise ValueError(f"--space {item!r}: {name!r} is not searched; the space is {sorted(space)}")
        search = space.pop(name)
        kind = _value_type(search)
        if ":" in text:
            if search.choices:
                raise ValueError(f"--space {item!r}: {name} is searched over choices ({search.describe()}); give NAME=A,B")
            low, _, high = text.partition(":")
            space[name] = dataclasses.replace(search, low=_parse(name, low, kind), high=_parse(name, high, kind))
        elif "," in text:
            space[name] = Search(choices=tuple(_parse(name, part, kind) for part in text.split(",") if part.strip()))
        else:
            fixed[name] = _parse(name, text, kind)
    return space, fixed


def _value_type(search: Search) -> type:
    if search.choices:
        kinds = {type(choice) for choice in search.choices}
        return kinds.pop() if len(kinds) == 1 else str
    return int if search.integer else float


def _parse(name: str, text: str, kind: type) -> Any:
    try:
        return kind(text.strip())
    except ValueError:
        raise ValueError(f"--space {name}: {text.strip()!r} is not a {kind.__name__}") from None
