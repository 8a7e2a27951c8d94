"""experiments/__init__.py's index names every module of experiments/ and experiments/frame/, and
nothing else: a module added without a line there, or a line left after its module went, fails."""

import re
from pathlib import Path

import experiments

PACKAGE = Path(experiments.__file__).parent
LISTED = re.compile(r"^ {4}((?:frame/)?[a-z0-9_]+\.py) {2,}\S", re.MULTILINE)  # "    NAME.py   what it is"


def test_the_index_lists_every_module_and_only_those():
    listed = LISTED.findall(experiments.__doc__)
    modules = {str(path.relative_to(PACKAGE)) for path in PACKAGE.glob("**/*.py") if path.name != "__init__.py"}
    assert sorted(set(listed) - modules) == [], "the index of experiments/__init__.py lists modules that do not exist"
    assert sorted(modules - set(listed)) == [], "modules missing from the index of experiments/__init__.py"
    assert len(listed) == len(set(listed)), f"listed twice: {sorted({name for name in listed if listed.count(name) > 1})}"


def test_no_experiment_imports_the_benchmarks_or_the_tests():
    """The benchmarks and the tests sit above the experiments: an arrow from below runs the wrong way."""
    wrong = []
    for path in sorted(PACKAGE.glob("**/*.py")):
        for line in path.read_text().splitlines():
            if re.match(r"\s*(from|import) (benchmarks|tests)\b", line):
                wrong.append(f"{path.relative_to(PACKAGE)}: {line.strip()}")
    assert wrong == [], f"experiments/ imports from above it: {wrong}"
