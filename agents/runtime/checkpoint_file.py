"""A checkpoint file inspected before anything loads it: its zip entries and its pickle's opcodes, none of it run.

torch.save writes a zip archive of stored (uncompressed) entries: `data.pkl`, the pickle of the
payload, whose tensors refer to the other entries, one per storage. Two things are read from it
without loading it:

- `check_archive`: the entries. A compressed entry is refused: torch.save never writes one, and
  DEFLATE inflates about 1,000:1, so a file of a few MB could make torch.load ask for more memory
  than the machine has before any check. With every entry stored, loading holds what the file
  holds (torch.load checks each storage entry against the size the pickle claims for it before
  allocating), and the entries' total is checked against the memory available
  (agents/runtime/memory_budget.py).
- `read_pickle`: the pickle's opcodes, walked with pickletools, which runs none of them: the
  top-level `kind` and `format` (the first keys save_checkpoint writes, in both formats) and the
  globals the pickle names (GLOBAL, STACK_GLOBAL). So the converter of format 1 tells a format-1
  file from any other before it unpickles anything, and a refusal names the global it blocked.
"""

from __future__ import annotations

import dataclasses
import pickletools
import zipfile
from pathlib import Path

from agents.runtime.memory_budget import TooLarge, check_fits

STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING"}
INT_OPS = {"BININT", "BININT1", "BININT2", "INT", "LONG", "LONG1"}
MEMO_PUT, MEMO_GET = {"PUT", "BINPUT", "LONG_BINPUT"}, {"GET", "BINGET", "LONG_BINGET"}
NO_PUSH = {"PROTO", "FRAME", "MEMOIZE", *MEMO_PUT, "MARK", "STOP"}  # opcodes that push nothing on the stack


class ArchiveError(ValueError):
    """A checkpoint archive refused before loading: a compressed entry, an entry larger than the
    file holds, a total beyond the memory available, or no pickle."""


@dataclasses.dataclass(frozen=True)
class PickleFacts:
    """What a checkpoint's pickle says of itself, read without running it."""

    kind: str | None  # the payload's "kind", where it is the string right after the key
    format: int | None  # its "format", where it is the integer right after the key
    globals: tuple[str, ...]  # every global it names, "module.name" ("?" where the walk cannot tell)


def check_archive(path: Path) -> zipfile.ZipInfo:
    """Check the archive's entries (see the module docstring); its pickle entry, `*/data.pkl`.
    ArchiveError saying what is wrong."""
    with zipfile.ZipFile(path) as archive:
        entries = archive.infolist()
    compressed = [entry for entry in entries if entry.compress_type != zipfile.ZIP_STORED]
    if compressed:
        entry = compressed[0]
        raise ArchiveError(f"entry {entry.filename!r} is compressed ({entry.compress_size:,} bytes that inflate to "
                           f"{entry.file_size:,}); torch.save stores every entry uncompressed, so this file was made otherwise "
                           f"and is refused before anything of it is inflated")
    on_disk = path.stat().st_size
    oversized = [entry for entry in entries if entry.file_size != entry.compress_size or entry.file_size > on_disk]
    if oversized:
        raise ArchiveError(f"entry {oversized[0].filename!r} claims {oversized[0].file_size:,} bytes, more than the file holds; "
                           f"the archive is corrupt or crafted")
    try:
        check_fits(f"loading {path.name} ({len(entries)} entries)", sum(entry.file_size for entry in entries),
                   "it cannot be loaded on this machine")
    except TooLarge as error:
        raise ArchiveError(str(error)) from None
    pickles = [entry for entry in entries if entry.filename.endswith("/data.pkl") or entry.filename == "data.pkl"]
    if len(pickles) != 1:
        raise ArchiveError(f"it holds {len(pickles)} data.pkl entries, where torch.save writes one")
    return pickles[0]


def read_pickle(path: Path) -> PickleFacts:
    """The checkpoint's kind, format and globals, from its pickle's opcodes (nothing is run);
    ArchiveError (from check_archive) or ValueError for a pickle pickletools cannot walk."""
    entry = check_archive(path)
    with zipfile.ZipFile(path) as archive:
        data = archive.read(entry)
    return pickle_facts(data)


def pickle_facts(data: bytes) -> PickleFacts:
    """PickleFacts of a pickle's bytes. The walk keeps the values the stack's last pushes were
    where they are strings or integers (and the memo's strings), enough to read a STACK_GLOBAL's
    module and name and the values after the "kind" and "format" keys. ValueError where
    pickletools cannot read the bytes as a pickle."""
    memo: dict[int, object] = {}
    pushed: list[object] = []  # the values of the last pushes (None: not a string or an integer)
    named: list[str] = []
    facts: dict[str, object] = {}
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name in STRING_OPS or name in INT_OPS:
            value = arg.decode("latin-1") if isinstance(arg, bytes) else arg
            if len(pushed) >= 1 and pushed[-1] in ("kind", "format") and pushed[-1] not in facts:
                facts[pushed[-1]] = value
            pushed.append(value)
        elif name in MEMO_PUT or name == "MEMOIZE":
            memo[arg if name in MEMO_PUT else len(memo)] = pushed[-1] if pushed else None
        elif name in MEMO_GET:
            pushed.append(memo.get(arg))
        elif name == "GLOBAL":
            named.append(arg.replace(" ", "."))
            pushed.append(None)
        elif name == "STACK_GLOBAL":
            module, attribute = (pushed[-2], pushed[-1]) if len(pushed) >= 2 else (None, None)
            named.append(f"{module}.{attribute}" if isinstance(module, str) and isinstance(attribute, str) else "?")
            pushed.append(None)
        elif name not in NO_PUSH:
            pushed.append(None)
        del pushed[:-2]
    kind, version = facts.get("kind"), facts.get("format")
    return PickleFacts(kind if isinstance(kind, str) else None, version if isinstance(version, int) else None,
                       tuple(dict.fromkeys(named)))
