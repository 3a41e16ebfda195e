"""Everything the product imports is installed by `make demo` (the project's own dependencies).

`make demo` installs ``pip install -e .`` without the ``test`` extra. A
third-party module imported by ``portal/`` or ``queues/`` (the emulator and the
simulator included: the demo runs them) whose distribution is only a test extra
breaks the demo on a fresh clone while every test passes. This walks the
imports of those packages and checks each third-party top-level module belongs
to a distribution in ``[project].dependencies`` or their requirements.
"""

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("portal", "queues")


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _closure(names: set[str]) -> set[str]:
    """The distributions ``names`` install, with their requirements (no extras)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:  # a requirement whose marker excludes this Python
            continue
        seen.add(name)
        for req in requires:
            if "extra ==" in req.replace('"', "").replace("'", ""):
                continue
            todo.append(_name(req))
    return seen


def _top_level_imports() -> dict[str, str]:
    """Top-level module -> one file importing it, for every absolute import in PACKAGES."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    mods = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    mods = [node.module]
                else:
                    continue
                for mod in mods:
                    found.setdefault(mod.split(".")[0], str(path.relative_to(REPO)))
    return found


def test_every_third_party_import_comes_from_a_runtime_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    installed = _closure({_name(r) for r in project["dependencies"]})
    providers = metadata.packages_distributions()
    missing = {}
    for module, where in _top_level_imports().items():
        if module in sys.stdlib_module_names or module in PACKAGES or module == "__future__":
            continue
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
        assert dists, f"{module} (imported by {where}) is not installed at all"
        if not dists & installed:
            missing[module] = (where, sorted(dists))
    assert missing == {}, f"imported by the product but only a test/optional dependency: {missing}"


def test_the_check_sees_a_test_only_distribution():
    """The walk can fail: pytest is installed (test extra) but not a runtime dependency."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    installed = _closure({_name(r) for r in project["dependencies"]})
    assert "pytest" not in installed
    assert "kubernetes-validate" in installed
