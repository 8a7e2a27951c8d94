"""The documentation site builds with `mkdocs build --strict`: a broken link or anchor, a page
missing from the nav, a missing figure, an experiment table not in assets/, or an API page whose
module griffe cannot read fails the tests (and so CI, which runs them). Each experiment table
lives once, in assets/EXPERIMENT/NAME.md, and reaches the site only through a page's snippet
include, unless its result is superseded (CHANGELOG.md links its JSON). assets/ holds one folder
per experiment and no file at its top."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ASSETS = ROOT / "assets"
TABLES = sorted(ASSETS.rglob("*.md"))
INCLUDE = re.compile(r'^\s*--8<-- "([^"]+)"\s*$', re.MULTILINE)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return out


def includes() -> dict[str, list[str]]:
    """Table file (relative to assets/) -> the pages that include it."""
    found: dict[str, list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for name in INCLUDE.findall(page.read_text()):
            found.setdefault(name, []).append(str(page.relative_to(DOCS)))
    return found


def test_the_site_has_every_page_figure_and_table(site):
    assert (site / "index.html").is_file()
    assert (site / "assets" / "memory_reach" / "memory_reach.png").is_file(), "the hook did not publish assets/"
    for page in site.rglob("*.html"):
        assert "--8<--" not in page.read_text(), f"{page}: a snippet include was left unexpanded"
    mazes = (site / "experiments" / "mazes" / "index.html").read_text()
    assert "5.50 [5.25, 5.66]" in mazes, "assets/mazes/mazes.md's table is not on the mazes page"
    feedback_api = (site / "api" / "feedback" / "index.html").read_text()
    assert "FeedbackCore" in feedback_api, "mkdocstrings did not render agents.cores.feedback.core"


def superseded() -> set[str]:
    """The tables (relative to assets/) of results superseded since: CHANGELOG.md names each with a
    link to its JSON, which stays; its table leaves the pages."""
    links = re.findall(r"\(assets/([\w./-]+)\.json\)", (ROOT / "CHANGELOG.md").read_text())
    return {f"{stem}.md" for stem in links}


def test_assets_hold_one_folder_per_experiment_and_no_file_at_the_top():
    loose = sorted(path.name for path in ASSETS.iterdir() if path.is_file())
    assert not loose, f"files at the top of assets/ (each belongs in its experiment's folder, where its runner writes): {loose}"


@pytest.mark.parametrize("table", TABLES, ids=[t.relative_to(ASSETS).as_posix() for t in TABLES])
def test_each_experiment_table_is_included_once_and_pasted_nowhere(table):
    name = table.relative_to(ASSETS).as_posix()
    if name in superseded():
        assert includes().get(name, []) == [], f"assets/{name} is superseded (CHANGELOG.md) yet {includes()[name]} include it"
    else:
        assert includes().get(name, []) != [], f"no docs page includes assets/{name}, nor does CHANGELOG.md name it superseded"
        assert len(includes()[name]) == 1, f"assets/{name} is included by {includes()[name]}"
    rows = [line for line in table.read_text().splitlines() if line.startswith("| ") and not line.startswith("|---")][1:]
    for page in sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]:
        text = page.read_text()
        pasted = [row for row in rows if row in text]
        assert not pasted, f"{page.relative_to(ROOT)} pastes rows of assets/{name} instead of including it: {pasted[:2]}"
