"""The scheduling layer's import rules, checked on the source (ARCHITECTURE.md).

specs and render import neither Django nor the kubernetes client; only
queues/quantity.py (quantity parsing, see its docstring) and
queues/cluster.py may import ``kubernetes``.
"""

import ast
from pathlib import Path

import pytest

QUEUES = Path(__file__).resolve().parents[3] / "queues"
KUBERNETES_ALLOWED = {"quantity.py", "cluster.py"}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


SOURCES = sorted(QUEUES.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(QUEUES)) for p in SOURCES])
def test_queues_module_imports(path):
    imported = _imports(path)
    assert "django" not in imported
    assert "portal" not in imported
    if path.relative_to(QUEUES).as_posix() not in KUBERNETES_ALLOWED:
        assert "kubernetes" not in imported
