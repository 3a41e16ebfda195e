"""The layering rules of the README's architecture section, checked on the import graph.

Every import of ``portal/``, ``queues/`` and ``harness/`` (module level and inside
functions, ``import x`` and ``from x import y``, relative ones resolved) is read with
:mod:`ast`, so a rule cannot be dodged by importing late. The rules:

* ``queues/`` imports no Django and nothing from ``portal`` or ``harness``;
* nothing in ``portal/`` or ``queues/`` imports ``harness``;
* ``portal/selectors/`` imports no ``portal.services`` (reads never write);
* ``portal/services/`` imports no ``portal.tasks`` (they enqueue by task name);
* no backend name is compared outside ``queues/backends/`` (the registry decides);
* the graph of ``portal`` and ``queues`` modules has no circle.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("portal", "queues", "harness")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of PACKAGES (migrations left out)."""
    return {_module_name(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")
            if "migrations" not in p.parts}


def _imported(module: str, path: Path) -> set[str]:
    """Every module name ``module`` imports (``from a import b`` gives ``a`` and ``a.b``)."""
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            names |= {f"{target}.{alias.name}" for alias in node.names}
    return names


@cache
def _graph() -> dict[str, set[str]]:
    """Module -> the modules of PACKAGES it imports (the nearest existing module of a name)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = set()
        for name in _imported(module, path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                edges.add(name)
        graph[module] = edges
    return graph


def _all_imports(prefix: str) -> dict[str, set[str]]:
    """Module of ``prefix`` -> every name it imports (first-party or not)."""
    return {m: _imported(m, p) for m, p in _modules().items()
            if m == prefix or m.startswith(prefix + ".")}


def _offenders(prefix: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for module, names in _all_imports(prefix).items():
        bad = sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden))
        if bad:
            found[module] = bad
    return found


def test_queues_imports_no_django_no_portal_no_harness():
    assert _offenders("queues", ("django", "rest_framework", "celery", "portal", "harness")) == {}


def test_the_product_never_imports_the_harness():
    assert _offenders("portal", ("harness",)) == {}
    assert _offenders("queues", ("harness",)) == {}


def test_selectors_import_no_services():
    assert _offenders("portal.selectors", ("portal.services", "portal.tasks")) == {}


def test_services_enqueue_by_name_and_import_no_tasks():
    assert _offenders("portal.services", ("portal.tasks",)) == {}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _without_package_faces(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's ``__init__`` that re-exports its submodules is its face, not a layer:
    ``a/__init__ -> a/b`` is dropped so that ``a/b -> a/c`` (which runs ``a/__init__``)
    is not read as ``a/b -> a/__init__ -> a/b``."""
    return {m: {s for s in succs if not s.startswith(m + ".")} for m, succs in graph.items()}


@pytest.mark.parametrize("prefix", ["portal", "queues"])
def test_no_import_circle(prefix):
    graph = {m: {s for s in succs if s.split(".")[0] == prefix}
             for m, succs in _without_package_faces(_graph()).items()
             if m.split(".")[0] == prefix}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle():
    """The check can fail: a -> b -> c -> a is one circle, d alone none."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: ``== "volcano"``, ``!= 'kueue'``, ``in ("kueue", ...)``, ``Backend.VOLCANO``, and an
#: apiVersion compared with a constant.
_BACKEND_COMPARISON = re.compile(
    r"""(==|!=|\bin\b)\s*[(\[{]?\s*["'](kueue|volcano)["']"""
    r"""|["'](kueue|volcano)["']\s*(==|!=)"""
    r"""|Backend\.(KUEUE|VOLCANO)\b"""
    r"""|\[["']apiVersion["']\]\s*(==|!=)|get\(["']apiVersion["']\)\s*(==|!=)"""
    r"""|(==|!=)\s*[\w.]*API_VERSION\b""")


def test_no_backend_name_is_compared_outside_the_backends():
    offenders = []
    for module, path in _modules().items():
        if module.startswith("queues.backends"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _BACKEND_COMPARISON.search(code):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []
