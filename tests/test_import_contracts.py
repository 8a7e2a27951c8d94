"""The layers of docs/design.md as import-linter contracts (pyproject.toml, [tool.importlinter]).

The tree keeps every contract; and each kind of wrong-way import, written into a copy of the tree,
breaks the contract that forbids it, so a contract that checked nothing would fail here.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("durable", "envs", "agents", "seqtasks", "experiments", "benchmarks")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")  # installed by the dev extra

LAYERS = "each layer imports only the layers below it"
WRONG_WAY = [  # (file, the import written at its end, the contract it breaks)
    ("envs/corridor.py", "import agents.learners.train", LAYERS),
    ("durable/records.py", "import envs.batch", LAYERS),
    ("agents/runtime/actors.py", "from agents.config import a2c_config", LAYERS),
    ("agents/cores/lstm.py", "import agents.runtime.checkpoint", LAYERS),  # runtime and cores are independent
    ("agents/learners/train.py", "import experiments.frame.stats", LAYERS),
    ("agents/cores/gru.py", "import tests.float32", "nothing imports the tests"),
    ("benchmarks/cores.py", "from tests.cores import test_interface", "nothing imports the tests"),
    ("experiments/frame/stats.py", "import experiments.mazes", "the experiments' frame below the experiments"),
    ("seqtasks/models.py", "import agents.model.policy", "the supervised module uses no RL learner or policy"),
    ("envs/maze.py", "import envs.corridor", "each environment's rules stand alone"),
    ("agents/cores/lstm.py", "from agents.cores import gru", "each memory core stands alone"),
]


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter over the packages under `root`, with the contracts of its pyproject.toml."""
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=300)


def test_the_tree_keeps_every_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0 and "BROKEN" not in result.stdout, result.stdout + result.stderr


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory) -> Path:
    """The packages and pyproject.toml, copied; each test writes one import into it and takes it out."""
    root = tmp_path_factory.mktemp("tree")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", root)
    return root


@pytest.mark.parametrize("file, statement, contract", WRONG_WAY)
def test_a_wrong_way_import_breaks_its_contract(tree_copy, file, statement, contract):
    path = tree_copy / file
    original = path.read_text()
    path.write_text(original + f"\n{statement}  # written by the test\n")
    try:
        result = lint_imports(tree_copy)
    finally:
        path.write_text(original)
    module = file.removesuffix(".py").replace("/", ".")
    imported = statement.split()[1]
    imported = "tests" if imported.startswith("tests") else imported  # an outside package is named by its top
    if statement.startswith("from ") and imported != "tests":
        imported += "." + statement.split()[-1]  # from a package import a module: the module
    report = result.stdout
    assert result.returncode != 0, report
    broken = [line for line in report.splitlines() if re.fullmatch(r".* BROKEN( \(\d+ ignored imports?\))?", line)]
    assert len(broken) == 1 and broken[0].startswith(contract), report
    assert f"{module} -> {imported}" in report, report  # the copy was analysed, and this import is the one named
