"""Memory cores behind one interface, built by name.

    core = make_core("feedback", input_dim, d_model=64, span=32)
    state = core.initial_state(batch_size, device)
    y, state = core(x, state, first)   # x: (T, B, input_dim), first: (T, B) bool -> y: (T, B, core.output_dim)

`first[t, b]` is True where step t of sequence b begins an episode: nothing before it influences
outputs at or after it. The returned state is detached (truncated backpropagation through
time); its tensors are batch-major (dimension 0 is B) so envs can be indexed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
from torch import nn

from agents.cores.checks import check_choice
from agents.cores.feedback import compiled as feedback_compiled
from agents.cores.feedback.core import FeedbackConfig, FeedbackCore
from agents.cores.ffm import FFMConfig, FFMCore
from agents.cores.gru import GRUCore
from agents.cores.lstm import LSTMConfig, LSTMCore
from agents.cores.lru import LRUConfig, LRUCore
from agents.cores.mamba import MambaConfig, MambaCore
from agents.cores.mlp import MLPConfig, MLPCore
from agents.cores.recurrent import RecurrentConfig
from agents.cores.reservoir import ReservoirConfig, make_reservoir
from agents.cores.transformer import TransformerConfig, TransformerCore

# name -> (config class, builder taking (input_dim, config))
CORES: dict[str, tuple[type, Callable[[int, Any], nn.Module]]] = {
    "feedback": (FeedbackConfig, FeedbackCore),
    "transformer": (TransformerConfig, TransformerCore),
    "lstm": (LSTMConfig, LSTMCore),
    "gru": (RecurrentConfig, GRUCore),
    "reservoir": (ReservoirConfig, make_reservoir),
    "ffm": (FFMConfig, FFMCore),
    "lru": (LRUConfig, LRUCore),
    "mamba": (MambaConfig, MambaCore),
    "mlp": (MLPConfig, MLPCore),
}


def core_options(name: str) -> dict[str, Any]:
    """The options core `name` takes, with their defaults."""
    config_class, _ = _lookup(name)
    return {f.name: f.default for f in dataclasses.fields(config_class)}


def make_core(name: str, input_dim: int, **options: Any) -> nn.Module:
    """Build core `name` for inputs of width `input_dim`; options are its config's fields."""
    config_class, build = _lookup(name)
    if isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1:
        raise ValueError(f"input_dim must be an integer >= 1, got {input_dim!r}")
    allowed = core_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for core {name!r}; it takes {sorted(allowed)}")
    return build(input_dim, config_class(**options))


def with_changed_defaults(name: str, options: dict[str, Any], saved: bool = False) -> dict[str, Any]:
    """Core `name`'s `options` with every default that has changed named, so that what they build
    does not change with the next default: the LSTM's and GRU's `gate_init` and `t_max` (the
    LSTM's default was "chrono" from 2026-11-27 to 2026-12-06, "pytorch" before and after).
    `saved`: the options come from a checkpoint, and one without `gate_init` was made before
    2026-11-27, when every recurrent core started from torch's biases: "pytorch"."""
    config_class, _ = _lookup(name)
    if not issubclass(config_class, RecurrentConfig):
        return options
    gate_init = options.get("gate_init", "pytorch" if saved else config_class.gate_init)
    return {**options, "gate_init": gate_init, "t_max": options.get("t_max", config_class.t_max)}


def run_options(name: str, options: dict[str, Any], device: torch.device, dtype: torch.dtype,
                saved: bool = False) -> dict[str, Any]:
    """Core `name`'s `options` with the choices a run makes once, at its start, for the device it
    runs on and the dtype it computes in, and the defaults that have changed, so that a run's
    config says what it was built with:
    - the Feedback core's `step` ("auto" becomes "compiled" or "python": feedback/compiled.py);
      ValueError where a step given cannot run there;
    - the defaults that have changed (`with_changed_defaults`): the LSTM's and GRU's `gate_init`
      and `t_max`.

    `saved`: the options come from a checkpoint (a resumed or evaluated run), whose `step` is the
    path its run took where it ran. Where that path cannot run here (a CPU run resumed or
    evaluated on a GPU) it is chosen again, as auto: both paths compute the same model."""
    config_class, _ = _lookup(name)
    if config_class is not FeedbackConfig:
        return with_changed_defaults(name, options, saved)
    step, persistent = options.get("step", FeedbackConfig.step), options.get("persistent", FeedbackConfig.persistent)
    check_choice("step", step, feedback_compiled.STEPS)
    blocked = feedback_compiled.blocker(persistent)
    try:
        return {**options, "step": feedback_compiled.choose(step, blocked, device, dtype, torch.float32)}
    except ValueError:
        if not saved:
            raise
        return {**options, "step": feedback_compiled.choose("auto", blocked, device, dtype, torch.float32)}


def _lookup(name: str):
    if name not in CORES:
        raise ValueError(f"unknown core {name!r}; choose from {sorted(CORES)}")
    return CORES[name]
