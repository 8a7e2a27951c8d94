"""Convert a format-1 checkpoint of one's own into format 2, the format that loads without running code.

    python -m agents.convert_checkpoint --i-trust-this-file runs/maze-feedback-20260101-120000

Format 1 (feedback-rl before 2026-11-27) pickled Python objects: numpy arrays, the cores' state
NamedTuples, the envs themselves (cloudpickle). Reading such a file runs whatever its pickle says,
so this converter is for files you made yourself: it reads the file with the full unpickler
(`--i-trust-this-file` says you know), writes the same run as plain data (agents/runtime/checkpoint.py),
and keeps the original beside it as `checkpoint.pt.format1`. The suite's own envs keep their
state; another env's state was arbitrary Python and is dropped, so the resumed run starts fresh
episodes of it (as a format-2 checkpoint of such an env does). A2C, PPO and seqtasks checkpoints
alike.

Before it unpickles anything it reads the file's kind, format and the globals its pickle names
from the pickle's opcodes (agents/runtime/checkpoint_file.py), which runs none of them: a file of
another format is refused unrun, and so is one naming a global outside what format 1 held
(SUITE_GLOBALS: numpy, torch's tensor rebuilding, the suite's own classes), in the file or in
its pickled envs, so that even a trusted-looking file cannot call os.system.
"""

from __future__ import annotations

import argparse
import io
import pickle
import shutil
import sys
import types
import zipfile
from typing import Any

import numpy as np
import torch

import agents.cores  # noqa: F401  (registers the cores' state types)
from agents.runtime.checkpoint import FORMAT, CheckpointError, arrays_to_tensors, existing_checkpoint, save_checkpoint
from agents.runtime.checkpoint_file import ArchiveError, pickle_facts, read_pickle
from agents.cores.state import STATE_TYPES, state_to_plain
from envs.vector import GridVectorEnv

KINDS = ("a2c", "ppo", "seqtasks")
# Format-1 pickles name the modules of their classes as they were when the file was written; these
# have moved since (agents/ by role and the Feedback core as a package, 2026-11-27).
MOVED = {
    "agents.cores.feedback": "agents.cores.feedback.core",
    "agents.cores.feedback_reference": "agents.cores.feedback.reference",
    "agents.cores.feedback_step": "agents.cores.feedback.step",
    **{f"agents.{name}": f"agents.learners.{name}" for name in ("a2c", "ppo", "train", "window", "episode_packing", "rollout")},
    **{f"agents.{name}": f"agents.config.{name}" for name in ("a2c_config", "ppo_config", "config_cli")},
    "agents.policy": "agents.model.policy",
    **{f"agents.{name}": f"agents.runtime.{name}" for name in (
        "observations", "actors", "staging", "distributed", "checkpoint", "seeding", "device", "precision")},
}

# What a format-1 checkpoint's pickle (and its envs' cloudpickle) names: globals starting so.
SUITE_GLOBALS = ("agents.", "envs.", "numpy._core.", "numpy.core.", "numpy.random.", "numpy.dtype", "numpy.ndarray",
                 "torch._utils._rebuild_", "collections.OrderedDict", "_codecs.encode", "gymnasium.spaces.",
                 "gymnasium.vector.vector_env.", "gymnasium.envs.registration.EnvSpec")


def check_globals(names: tuple[str, ...], where: str) -> None:
    """CheckpointError naming the first of `names` (a pickle's globals) outside SUITE_GLOBALS."""
    foreign = [name for name in names if not (name.startswith(SUITE_GLOBALS) or (name.startswith("torch.") and name.endswith("Storage")))]
    if foreign:
        raise CheckpointError(f"{where} names {foreign[0]}, which no format-1 checkpoint of feedback-rl holds; "
                              f"nothing of it was run and it is not converted")


class MovedModulesUnpickler(pickle.Unpickler):
    """The full unpickler, finding each class where it lives now (MOVED)."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED.get(module, module), name)


# torch.load's pickle_module: the pickle module with the unpickler above.
moved_pickle = types.SimpleNamespace(**{**vars(pickle), "Unpickler": MovedModulesUnpickler})


def convert(payload: dict[str, Any]) -> dict[str, Any]:
    """A format-1 checkpoint's payload as format 2 (see the module docstring)."""
    per_rank = payload.get("world_size", 1) > 1  # then "rng", "envs", "actor", "window", "regime" are lists, one per rank
    each = (lambda convert_one, value: [convert_one(part) for part in value]) if per_rank else (lambda convert_one, value: convert_one(value))
    out = dict(payload)
    out["rng"] = each(plain_rng, payload["rng"])
    if "envs" in payload:
        out["envs"] = each(plain_envs, payload["envs"])
        if None in (out["envs"] if per_rank else [out["envs"]]):
            # A foreign env (or none saved): the actor's carry and the window belong to episodes that cannot continue.
            for key in ("envs", "actor", "window"):
                out[key] = [None] * len(payload[key]) if per_rank else None
    return plain(out)


def plain_rng(states: dict[str, Any]) -> dict[str, Any]:
    """rng_states() of format 1 (numpy's legacy tuple) as agents/runtime/seeding.py now saves it."""
    name, key, pos, has_gauss, gauss = states["numpy"]
    numpy_state = {"bit_generator": name, "state": {"key": np.asarray(key).tolist(), "pos": int(pos)},
                   "has_gauss": int(has_gauss), "gauss": float(gauss)}
    return {**states, "numpy": numpy_state}


def plain_envs(saved: dict[str, Any] | None) -> dict[str, Any] | None:
    """The pickled vector envs of each actor shard as their get_state(); None for a foreign env."""
    if saved is None:
        return None
    states = []
    for blob in saved["state"]:
        check_globals(pickle_facts(blob).globals, "the checkpoint's pickled env")
        env = MovedModulesUnpickler(io.BytesIO(blob)).load()
        if not isinstance(env, GridVectorEnv):
            return None
        states.append(env.get_state())
    return {"shards": saved["shards"], "state": states}


def plain(tree: Any) -> Any:
    """`tree` with numpy arrays as tensors, numpy scalars as numbers and core states as plain dicts."""
    if isinstance(tree, tuple) and type(tree).__name__ in STATE_TYPES:
        return state_to_plain(tree)
    if isinstance(tree, dict):
        return {key: plain(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(plain(value) for value in tree)
    return arrays_to_tensors(tree)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agents.convert_checkpoint", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("run", metavar="RUN_DIR_or_CHECKPOINT", help="a run folder holding checkpoint.pt, or the file")
    parser.add_argument("--i-trust-this-file", action="store_true", required=True,
                        help="required: reading a format-1 checkpoint runs its pickle, so convert only files you made yourself")
    args = parser.parse_args(argv)
    try:
        path = existing_checkpoint(args.run)
        facts = read_pickle(path)  # read from the opcodes: nothing unpickled yet
        if facts.kind not in KINDS:
            raise CheckpointError(f"{str(path)!r} is not a feedback-rl checkpoint (kind one of {list(KINDS)}); nothing of it was run")
        if facts.format != 1:
            raise CheckpointError(f"{str(path)!r} has format {facts.format!r}; only format 1 is converted, and nothing of it was run")
        check_globals(facts.globals, repr(str(path)))
        payload = torch.load(path, map_location="cpu", weights_only=False, pickle_module=moved_pickle)
        converted = convert({key: value for key, value in payload.items() if key not in ("kind", "format")})
    except (CheckpointError, ArchiveError, zipfile.BadZipFile, pickle.UnpicklingError, OSError, KeyError, TypeError, ValueError) as error:
        parser.error(str(error))
    backup = path.with_name(path.name + ".format1")
    shutil.copy2(path, backup)
    save_checkpoint(path, payload["kind"], converted)
    kept = "" if converted.get("envs", True) is not None else "; the env is not one of the suite's, so a resume starts fresh episodes"
    print(f"converted {path} to format {FORMAT} (the original is {backup}){kept}", file=sys.stderr)


if __name__ == "__main__":
    main()
