"""Every command shown in the README's quick start and on the getting-started page parses, at
--help level: `python SCRIPT.py ...` and `python -m MODULE ...` are run up to their argument
parser and stopped there (nothing is trained or written), `pip install` names only extras that
pyproject.toml defines, and `tensorboard` takes its flags. A command of any other kind fails
the test, so nothing shown goes unchecked."""

import argparse
import re
import runpy
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The names under [project.optional-dependencies] (read by hand: tomllib is Python 3.11+).
EXTRAS = set(re.findall(r"^([a-z][\w-]*) = \[", (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1].split("\n[")[0], re.MULTILINE))


def bash_blocks(text: str) -> list[str]:
    return [part.split("```", 1)[0] for part in text.split("```bash\n")[1:]]


def shown_commands() -> list[tuple[str, str]]:
    """(where, command) for every command in the quick start and on the getting-started page."""
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    pages = {"README.md quick start": quick_start, "docs/getting-started.md": (ROOT / "docs" / "getting-started.md").read_text()}
    commands = []
    for where, text in pages.items():
        for block in bash_blocks(text):
            for line in block.splitlines():
                line = line.split(" #", 1)[0].strip()
                commands += [(where, command.strip()) for command in line.split("&&") if command.strip()]
    return commands


COMMANDS = shown_commands()


class Parsed(Exception):
    """Raised in place of running the program once its arguments have parsed."""


def run_until_parsed(monkeypatch, argv: list[str], run) -> None:
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(Parsed):
        run()


def test_the_pages_show_the_main_commands():
    shown = [command for _, command in COMMANDS]
    assert any(c.startswith("python train_a2c.py") for c in shown) and any(c.startswith("python evaluate.py") for c in shown), shown
    assert 'pip install -e ".[dev]"' in shown and any(c.startswith("python -m pytest -q") for c in shown), shown


@pytest.mark.filterwarnings("ignore:html5lib's sanitizer is deprecated:DeprecationWarning")  # tensorboard's vendored bleach
@pytest.mark.parametrize("where, command", COMMANDS, ids=[f"{w}: {c[:60]}" for w, c in COMMANDS])
def test_shown_command_parses(where, command, monkeypatch, capsys):
    words = shlex.split(command)
    if words[:2] == ["pip", "install"]:
        for word in words[2:]:
            if "[" in word:
                named = set(word.split("[", 1)[1].rstrip("]").split(","))
                assert named <= EXTRAS, f"{where}: {command!r} names extras {sorted(named - EXTRAS)}; pyproject.toml has {sorted(EXTRAS)}"
    elif words[:3] == ["python", "-m", "pytest"]:
        # -q, a marker expression, and pytest-xdist's three workers stealing each other's tests
        known = {"-q", "-m", "not slow", "-n", "3", "--dist", "worksteal"}
        assert set(words[3:]) <= known, f"{where}: {command!r}: pytest flags this test does not know"
    elif words[0] == "tensorboard":
        from tensorboard import program

        program.TensorBoard().configure(argv=words)
    elif words[:2] == ["python", "-m"]:
        run_until_parsed(monkeypatch, [words[2], *words[3:]], lambda: runpy.run_module(words[2], run_name="__main__", alter_sys=True))
    elif words[0] == "python" and words[1].endswith(".py"):
        run_until_parsed(monkeypatch, words[1:], lambda: runpy.run_path(str(ROOT / words[1]), run_name="__main__"))
    else:
        pytest.fail(f"{where}: no way to check {command!r}; teach tests/docs/test_doc_commands.py how")
