"""Operations on any core's state, whatever its fields.

Every core's state is a NamedTuple whose tensor fields are batch-major (dimension 0 is the env),
beside fields shared by the whole batch (a buffer's end, a weights version, an append log).

Checkpoints hold no Python objects (agents/runtime/checkpoint.py), so a state is saved as a plain dict,
`state_to_plain`, and rebuilt by `state_from_plain` from the state types the cores register with
`register_state`. Two fields are not carried over: the weights version (a version made in another
process never matches one here, so None, "not made by these weights", is the same), and the
append log, which only says who may write on into the buffers (agents/cores/append_log.py). A
checkpoint's states may share buffers (torch.save keeps shared storage shared), so a restored
state never writes into them in place: its first call starts new buffers with a copy of its
window, which holds the same numbers.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from agents.cores.append_log import AppendLog

STATE_TYPES: dict[str, type] = {}  # class name -> a core's state NamedTuple


def register_state(state_type: type) -> type:
    """Class decorator: `state_type` (a core's state NamedTuple) can be rebuilt from a checkpoint."""
    STATE_TYPES[state_type.__name__] = state_type
    return state_type


def state_to_plain(state: NamedTuple) -> dict[str, Any]:
    """`state` as tensors, numbers and strings only, for a checkpoint (see the module docstring)."""
    name = type(state).__name__
    if STATE_TYPES.get(name) is not type(state):
        raise TypeError(f"{type(state).__qualname__} is not a registered core state (agents/cores/state.py:register_state)")
    fields = {}
    for field, value in state._asdict().items():
        if isinstance(value, AppendLog):
            value = "append_log"
        elif field == "version":
            value = None
        elif not (value is None or isinstance(value, (torch.Tensor, int, float))):
            raise TypeError(f"{name}.{field} holds a {type(value).__name__}, which a checkpoint cannot hold")
        fields[field] = value
    return {"type": name, "fields": fields}


def state_from_plain(plain: dict[str, Any]) -> NamedTuple:
    """The state that state_to_plain saved; a ValueError naming what does not fit."""
    try:
        state_type, fields = STATE_TYPES[plain["type"]], dict(plain["fields"])
    except (KeyError, TypeError):
        known = sorted(STATE_TYPES)
        raise ValueError(f"not a saved core state (a dict with 'type', one of {known}, and 'fields'): {plain!r:.200}") from None
    # a field with a default may be missing: the state was saved before the field was added
    if not set(state_type._fields) - set(state_type._field_defaults) <= set(fields) <= set(state_type._fields):
        raise ValueError(f"a saved {plain['type']} has fields {sorted(fields)}, this version's {sorted(state_type._fields)}")
    for field, value in fields.items():
        if value == "append_log":
            fields[field] = AppendLog(-1)  # no end matches it: the first call starts new buffers
    return state_type(**fields)


def select_envs(state: NamedTuple, index: torch.Tensor) -> NamedTuple:
    """The state of envs `index` (a (K,) long or (B,) bool tensor), in that order: for actors
    that own a shard of the envs, or for dropping envs from a batch."""
    return state._replace(**{name: value[index] for name, value in state._asdict().items() if isinstance(value, torch.Tensor)})


def move_state(state: NamedTuple, device: torch.device | str) -> NamedTuple:
    """The state with its tensors on `device` (a loaded checkpoint's, for instance)."""
    return state._replace(**{name: value.to(device) for name, value in state._asdict().items() if isinstance(value, torch.Tensor)})
