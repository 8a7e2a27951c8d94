"""The calls a results file holds the work of: a file that several calls add to (a sweep run
model by model, probes taken a few runs at a time) names each of them, not only the last."""

from __future__ import annotations


def every_call(before: dict, command: str) -> list[str]:
    """The commands of the calls that wrote `before` (the file as it was: its "commands", or
    its one "command" where it predates the list) and then `command`, each once, latest last."""
    earlier = before.get("commands") or ([before["command"]] if "command" in before else [])
    return [*(c for c in earlier if c != command), command]
