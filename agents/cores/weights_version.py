"""Which weights a core's cached keys and values were made with.

The Transformer and Feedback cores store the keys and values they compute in their state, and an
acting call (no gradients) reuses them while `weights_version(core)` is the one stored beside
them. Two signals make that version:

- each parameter's tensor version counter (`p._version`), which every in-place edit bumps: an
  optimiser's in-place update, `p.add_` or `p.copy_` under torch.no_grad(), Polyak averaging,
  nn.init;
- an explicit tag per parameter, for the changes the counter misses: a fused optimiser
  (Adam(fused=True)) and a write through `p.data` update a parameter without bumping it. The tag
  is replaced by a fresh one
  - after every step of every torch optimiser, for the parameters it holds (one global
    post-hook, registered when this module is imported: no trainer has to remember it);
  - when load_state_dict writes a core's weights, itself or through a module that holds it (a
    post-hook each caching core registers with `track_loads`);
  - by `mark_weights_changed(module)`: whoever changes weights through `p.data` or replaces a
    parameter object must call it, on the core or a module that holds it.

A tag pairs a random token drawn once per process with a counter, so a state restored from a
checkpoint that another process wrote never matches a version here, nor does one core's match
another's.
"""

from __future__ import annotations

import itertools
import uuid

from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

_PROCESS = uuid.uuid4().hex
_counter = itertools.count()


def _fresh_tag(parameter: nn.Parameter) -> tuple[str, int]:
    parameter._weights_tag = tag = (_PROCESS, next(_counter))
    return tag


def _tag(parameter: nn.Parameter) -> tuple[str, int]:
    tag = getattr(parameter, "_weights_tag", None)
    return tag if tag is not None else _fresh_tag(parameter)


def weights_version(module: nn.Module) -> tuple:
    """A value that changes whenever a parameter of `module` changes (see the module docstring).
    The parameter list is taken at the first call, after construction, as walking the module
    tree costs more than an acting step; mark_weights_changed and loads take it afresh."""
    parameters = module.__dict__.get("_tracked_parameters")
    if parameters is None:
        parameters = module.__dict__["_tracked_parameters"] = list(module.parameters())
    return tuple((_tag(p), p._version) for p in parameters)


def mark_weights_changed(module: nn.Module) -> None:
    """Say that the weights of `module` (all of its tree) changed: caches made before are stale."""
    for parameter in module.parameters():
        _fresh_tag(parameter)
    for child in module.modules():
        child.__dict__.pop("_tracked_parameters", None)  # load_state_dict(assign=True) replaces parameters


def _weights_loaded(module: nn.Module, incompatible_keys) -> None:
    mark_weights_changed(module)


def track_loads(module: nn.Module) -> None:
    """Mark `module`'s weights changed whenever load_state_dict writes them, whether called on
    `module` or on a module that holds it."""
    module.register_load_state_dict_post_hook(_weights_loaded)


def _optimizer_stepped(optimizer, args, kwargs) -> None:
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            _fresh_tag(parameter)


register_optimizer_step_post_hook(_optimizer_stepped)
