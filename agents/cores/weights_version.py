"""Which weights a core's cached keys and values were made with.

The Transformer and Feedback cores store the keys and values they compute in their state, and an
acting call (no gradients) reuses them while `weights_version(core)` is the one stored beside
them. Two signals make that version:

- each parameter's tensor version counter (`p._version`), which every in-place edit bumps: an
  optimiser's in-place update, `p.add_` or `p.copy_` under torch.no_grad(), Polyak averaging,
  nn.init;
- an explicit tag per parameter, for the changes the counter misses: a fused optimiser
  (Adam(fused=True)) and a write through `p.data` update a parameter without bumping it (`p.data`
  is a tensor with a version counter of its own). The tag is replaced by a fresh one
  - after every step of every torch optimiser, for the parameters it holds (one global
    post-hook, registered when this module is imported: no trainer has to remember it);
  - whenever `p.data` is set or read: `p.data = ...` (which is how module.to(), .half(),
    .double() convert weights they keep), `p.data.copy_(...)`, `p.data.mul_(...)`. The first
    weights_version call makes each parameter a `TrackedParameter`, an nn.Parameter whose `data`
    attribute does this; a mere read through `p.data` counts too (only a recompute is lost);
  - when load_state_dict writes a core's weights, itself or through a module that holds it (a
    post-hook each caching core registers with `track_loads`);
  - by `mark_weights_changed(module)`: whoever replaces a parameter object by another outside
    load_state_dict must call it, on the core or a module that holds it.

A tag pairs a random token drawn once per process with a counter, so a state restored from a
checkpoint that another process wrote never matches a version here, nor does one core's match
another's.
"""

from __future__ import annotations

import itertools
import uuid

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

_PROCESS = uuid.uuid4().hex
_counter = itertools.count()


def _fresh_tag(parameter: nn.Parameter) -> tuple[str, int]:
    parameter._weights_tag = tag = (_PROCESS, next(_counter))
    return tag


class TrackedParameter(nn.Parameter):
    """An nn.Parameter whose tag is renewed whenever its `data` is set or read (see the module
    docstring); everything else is nn.Parameter's."""

    @property
    def data(self) -> torch.Tensor:
        _fresh_tag(self)
        return torch._C.TensorBase.data.__get__(self)

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        _fresh_tag(self)
        torch._C.TensorBase.data.__set__(self, value)


def weights_version(module: nn.Module) -> tuple:
    """A value that changes whenever a parameter of `module` changes (see the module docstring).
    The parameter list is taken at the first call, after construction, as walking the module
    tree costs more than an acting step (mark_weights_changed and loads take it afresh); its
    parameters become TrackedParameters then."""
    parameters = module.__dict__.get("_tracked_parameters")
    if parameters is None:
        parameters = module.__dict__["_tracked_parameters"] = list(module.parameters())
        for parameter in parameters:
            if type(parameter) is nn.Parameter:
                parameter.__class__ = TrackedParameter
    # each parameter's tag (the one _fresh_tag set, read from its __dict__: every acting call makes a version) and counter
    return tuple([(p.__dict__.get("_weights_tag") or _fresh_tag(p), p._version) for p in parameters])


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
