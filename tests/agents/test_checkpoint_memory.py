"""A checkpoint cannot take the machine's memory, nor steer its user into running it: the archive
is inspected before loading (a compressed entry, a zip bomb, is refused unread), a key its kind
does not write and a tensor larger than its stored bytes are refused, a refusal names the global
it blocked and suggests the converter only for format-1 files, and the converter reads a file's
format from its pickle's opcodes before it unpickles anything."""

import zipfile

import pytest
import torch

import evaluate
from agents import convert_checkpoint
from agents.runtime.checkpoint import CheckpointError, load_checkpoint
from tests.trained import trained_parameters
from tests.usage import refused

from tests.agents.test_safe_checkpoints import WritesMarker, small_config

BOMB_FLOATS = 25_000_000  # 100 MB of zeros, about 100 KB deflated


@pytest.fixture(scope="module")
def genuine(tmp_path_factory):
    path = tmp_path_factory.mktemp("genuine")
    trained_parameters(small_config(path))
    return path


def genuine_payload(genuine):
    return torch.load(genuine / "checkpoint.pt", weights_only=True)


def recompress(path, which):
    """Rewrite the archive at `path` with the entries `which(name)` picks DEFLATE-compressed."""
    with zipfile.ZipFile(path) as archive:
        entries = [(info.filename, archive.read(info)) for info in archive.infolist()]
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries:
            archive.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if which(name, data) else zipfile.ZIP_STORED)


def test_a_compressed_entry_is_refused_before_it_inflates(tmp_path, genuine, capsys):
    payload = genuine_payload(genuine)
    payload["window"] = {"bomb": torch.zeros(BOMB_FLOATS)}  # a key the trainer writes, holding 100 MB of zeros
    path = tmp_path / "checkpoint.pt"
    torch.save(payload, path)
    recompress(path, lambda name, data: len(data) == 4 * BOMB_FLOATS)
    assert path.stat().st_size < 1_000_000
    err = refused(capsys, evaluate.main, [str(tmp_path), "--episodes", "1"])
    assert "is compressed" in err and "100,000,000" in err and "Traceback" not in err


def test_a_key_no_checkpoint_has_is_refused_by_name(tmp_path, genuine):
    torch.save({**genuine_payload(genuine), "padding": torch.zeros(8)}, tmp_path / "checkpoint.pt")
    with pytest.raises(CheckpointError, match=r"keys a a2c checkpoint does not have \(padding\)"):
        load_checkpoint(tmp_path, "a2c")


def test_a_tensor_claiming_more_elements_than_it_stores_is_refused(tmp_path, genuine):
    payload = genuine_payload(genuine)
    payload["recent_returns"] = torch.zeros(1).expand(100_000, 100_000)  # 40 GB once copied, 4 bytes stored
    torch.save(payload, tmp_path / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="recent_returns .* claims more elements than it stores"):
        load_checkpoint(tmp_path, "a2c")


def test_a_refused_global_is_named_and_a_format_2_file_is_not_sent_to_the_converter(tmp_path, genuine, capsys):
    marker = tmp_path / "marker"
    torch.save({**genuine_payload(genuine), "config": WritesMarker(marker)}, tmp_path / "checkpoint.pt")
    err = refused(capsys, evaluate.main, [str(tmp_path), "--episodes", "1"])
    assert "posix.mkdir" in err and "convert_checkpoint" not in err and "will likely succeed" not in err
    assert not marker.exists()


def test_the_converter_reads_the_format_before_unpickling_and_runs_nothing_of_a_format_2_file(tmp_path, genuine, capsys):
    marker = tmp_path / "marker"
    torch.save({**genuine_payload(genuine), "config": WritesMarker(marker)}, tmp_path / "checkpoint.pt")
    err = refused(capsys, convert_checkpoint.main, [str(tmp_path), "--i-trust-this-file"])
    assert "format 2" in err and "only format 1 is converted" in err
    assert not marker.exists()


def test_the_converter_refuses_a_format_1_file_naming_a_global_outside_the_suite(tmp_path, genuine, capsys):
    marker = tmp_path / "marker"
    torch.save({**genuine_payload(genuine), "format": 1, "config": WritesMarker(marker)}, tmp_path / "checkpoint.pt")
    err = refused(capsys, convert_checkpoint.main, [str(tmp_path), "--i-trust-this-file"])
    assert "posix.mkdir" in err and not marker.exists()
