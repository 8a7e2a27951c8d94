"""Opening a run folder runs none of its code: checkpoints are plain data read with
torch.load(weights_only=True); a pickle anywhere in the file, a checkpoint of the old format, or an
env id naming an unknown module is refused with an error naming the file (exit code 2, no
traceback), and nothing of it runs. Genuine checkpoints still resume bit for bit (the exact-resume
tests in test_train.py, test_ppo.py and tests/seqtasks), and old ones of one's own convert."""

import pickle
import shutil
import sys

import cloudpickle
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import evaluate
import train_a2c
from agents import convert_checkpoint
from agents.config.a2c_config import resolve_config
from agents.runtime.checkpoint import CheckpointError, load_checkpoint, tensors_to_arrays
from agents.cores.state import state_from_plain
from agents.learners.train import Trainer
from envs.any_env import make_vector_env
from tests.trained import assert_same_parameters, trained_parameters
from tests.usage import refused


class WritesMarker:
    """Unpickling this creates the folder `path`: the stand-in for any code a pickle can run."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        import os

        return os.mkdir, (self.path,)


def small_config(run_dir, updates=2, **fields):
    return resolve_config({
        "env": "corridor", "core": "lstm", "num_envs": 4, "rollout": 8, "total_steps": updates * 32, "seed": 5, "threads": 1,
        "run_dir": str(run_dir), "core_options": {"hidden_size": 8}, "env_options": {"length": 3, "max_episode_steps": 7}, **fields,
    })


@pytest.fixture(scope="module")
def genuine(tmp_path_factory):
    """A trained run's folder (its checkpoint has envs, actor carry, window and generators)."""
    path = tmp_path_factory.mktemp("genuine")
    trained_parameters(small_config(path))
    return path


def test_a_checkpoint_holds_only_what_weights_only_loading_reads(genuine):
    payload = torch.load(genuine / "checkpoint.pt", weights_only=True)  # raises on anything else
    assert payload["format"] == 2 and payload["envs"] is not None and payload["actor"]["state"]["type"] == "LSTMState"


def test_a_pickle_that_runs_code_is_refused_and_runs_none_of_it(tmp_path, genuine, capsys):
    marker = tmp_path / "marker"
    folder = tmp_path / "shared"
    folder.mkdir()
    payload = torch.load(genuine / "checkpoint.pt", weights_only=True)
    torch.save({**payload, "config": WritesMarker(marker)}, folder / "checkpoint.pt")
    err = refused(capsys, evaluate.main, [str(folder), "--episodes", "1"])
    assert f"refused '{folder / 'checkpoint.pt'}'" in err and "nothing of it was run" in err and "Traceback" not in err
    err = refused(capsys, train_a2c.main, ["--resume", str(folder)])
    assert "refused" in err
    assert not marker.exists()


def test_a_pickle_in_the_env_state_is_never_unpickled(tmp_path, genuine):
    # Format 1 kept the envs as a cloudpickle blob that resuming unpickled: a genuine checkpoint
    # with a malicious blob there passed weights_only loading and ran its code.
    marker = tmp_path / "marker"
    folder = tmp_path / "shared"
    folder.mkdir()
    payload = torch.load(genuine / "checkpoint.pt", weights_only=True)
    payload["envs"]["state"] = [pickle.dumps(WritesMarker(marker))]
    torch.save(payload, folder / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="the checkpoint's envs or actor do not fit this run"):
        Trainer.from_checkpoint(str(folder))
    assert not marker.exists()


def test_an_env_module_from_a_checkpoint_is_imported_only_when_the_user_names_it(tmp_path, genuine, capsys, monkeypatch):
    marker = tmp_path / "marker"
    (tmp_path / "planted_envs.py").write_text(f"import os\nos.mkdir({str(marker)!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = tmp_path / "shared"
    folder.mkdir()
    payload = torch.load(genuine / "checkpoint.pt", weights_only=True)
    payload["config"]["env"] = "planted_envs:Planted-v0"
    torch.save(payload, folder / "checkpoint.pt")
    for command, argv in [(evaluate.main, [str(folder)]), (train_a2c.main, ["--resume", str(folder)])]:
        err = refused(capsys, command, argv)
        assert "would import module 'planted_envs'" in err and "--env-module planted_envs" in err
    assert not marker.exists()
    err = refused(capsys, evaluate.main, [str(folder), "--env-module", "planted_envs"])  # named: imported (then not an env)
    assert marker.exists() and "unknown env 'planted_envs:Planted-v0'" in err
    sys.modules.pop("planted_envs", None)


def test_a_checkpoint_without_its_config_is_refused_by_name(tmp_path, genuine, capsys):
    payload = torch.load(genuine / "checkpoint.pt", weights_only=True)
    del payload["config"]
    torch.save(payload, tmp_path / "checkpoint.pt")
    assert "holds no config" in refused(capsys, evaluate.main, [str(tmp_path)])
    assert "holds no config" in refused(capsys, train_a2c.main, ["--resume", str(tmp_path)])


def test_checkpoints_are_readable_like_the_config_beside_them(genuine):
    assert (genuine / "checkpoint.pt").stat().st_mode & 0o777 == (genuine / "config.json").stat().st_mode & 0o777


def as_format_1(payload: dict, config) -> dict:
    """A format-2 payload as format 1 wrote it: numpy arrays, NamedTuple states, the envs cloudpickled."""
    numpy_state = payload["rng"]["numpy"]
    key = np.asarray(numpy_state["state"]["key"], dtype=np.uint32)
    env = make_vector_env(config.env, config.num_envs, AutoresetMode.NEXT_STEP, **config.env_options)
    env.set_state(tensors_to_arrays(payload["envs"]["state"][0]))
    actor = {**tensors_to_arrays(payload["actor"]), "state": state_from_plain(payload["actor"]["state"])}
    return {
        **payload, "format": 1, "actor": actor, "envs": {"shards": 1, "state": [cloudpickle.dumps(env)]},
        "rng": {**payload["rng"], "numpy": ("MT19937", key, numpy_state["state"]["pos"], numpy_state["has_gauss"], numpy_state["gauss"])},
        "recent_returns": [np.float64(value) for value in payload["recent_returns"]],
    }


def test_an_old_checkpoint_is_refused_with_how_to_convert_it_and_converts_to_the_same_run(tmp_path, genuine, capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(genuine, new)
    old.mkdir()
    payload = torch.load(genuine / "checkpoint.pt", weights_only=True)
    torch.save(as_format_1(payload, small_config(old)), old / "checkpoint.pt")
    err = refused(capsys, evaluate.main, [str(old)])
    assert f"python -m agents.convert_checkpoint --i-trust-this-file {old / 'checkpoint.pt'}" in err
    assert "--i-trust-this-file" in refused(capsys, convert_checkpoint.main, [str(old)])  # the flag is required

    convert_checkpoint.main([str(old), "--i-trust-this-file"])
    assert (old / "checkpoint.pt.format1").is_file() and load_checkpoint(old, "a2c")["format"] == 2
    # It continues as the genuine checkpoint does: the same weights after two more updates.
    results = []
    for folder in (new, old):
        trainer = Trainer.from_checkpoint(str(folder), {"total_steps": 4 * 32})
        try:
            assert trainer.resumed_how.startswith("envs and memory continue")
            trainer.train()
        finally:
            trainer.close()
        results.append(trainer.policy.state_dict())
    assert_same_parameters(*results)
