"""MkDocs hook: publish the repository's assets/ folder (figures, GIFs, per-seed JSON, one folder
per experiment) as assets/ of the site, as if it lay at docs/assets/: pages link to
`assets/EXPERIMENT/NAME.png` (from docs/) or `../assets/EXPERIMENT/NAME.png` (from
docs/experiments/), and `mkdocs build --strict` checks every such link. Nothing is copied into
docs/, and no symlink is needed, so a fresh clone builds as it is.

The experiment tables (assets/EXPERIMENT/NAME.md) are not pages: each experiment page includes its
table with pymdownx.snippets (`--8<-- "EXPERIMENT/NAME.md"`, relative to assets/), so a table
lives in one file.
"""

from pathlib import Path

from mkdocs.structure.files import File

ASSETS = "assets"


def on_files(files, config):
    root = Path(config.config_file_path).parent
    for path in sorted((root / ASSETS).rglob("*")):
        if path.is_file() and path.suffix != ".md":
            files.append(File(path.relative_to(root).as_posix(), src_dir=str(root), dest_dir=config.site_dir,
                              use_directory_urls=config.use_directory_urls))
    return files
