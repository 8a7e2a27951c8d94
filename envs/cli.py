"""argparse types the envs' command lines share: a bad value exits with status 2 and a message
that names it and what is allowed."""

from __future__ import annotations

import argparse

import envs


def env_name(text: str) -> str:
    """A short env name or registered id, as given (envs.env_id maps it where it is used)."""
    try:
        envs.env_id(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def int_at_least(text: str, low: int, what: str) -> int:
    """`text` as an integer >= `low`; an argparse error "{what} an integer >= low, got ..." otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} an integer >= {low}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{what} an integer >= {low}, got {value}")
    return value


def env_seed(text: str) -> int:
    """A seed: an integer >= 0, as numpy and gymnasium take it (they refuse a negative one, but
    only once the env is made, with a traceback)."""
    return int_at_least(text, 0, "a seed is")


def positive_int(text: str) -> int:
    return int_at_least(text, 1, "must be")


def non_negative_int(text: str) -> int:
    return int_at_least(text, 0, "must be")


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}") from None
    if not 0.0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    value = non_negative_float(text)
    if value == 0.0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {value}")
    return value
