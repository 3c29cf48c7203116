"""Imports point one way: the layering of ``libs/`` and ``services/``, checked from the source.

Every module's imports are read with ``ast`` (nothing is imported), and the
graph of ``cogsub`` modules must keep this layering, lowest floor first:

    core                  the domain's types, keys and errors; imports no other cogsub module
    telemetry             logging, tracing, metrics; imports core only
    ports and adapters    everything else in libs/ (bus, archive, index, embeddings, ...):
                          core, telemetry and one another, never the SDK
    sdk                   the HTTP client library; core and telemetry only
    services              anything in libs/; nothing in libs/ imports a service

and no two modules may import each other, directly or through others.

Which imports count: every ``import`` and ``from ... import`` of a ``cogsub``
module anywhere in a file, at the top, inside functions (a lazy import is still
a dependency, only a later one) and under ``if TYPE_CHECKING:`` (type-only
imports still tie a library to a service's code, and they hide cycles rather
than remove them). ``from pkg import name`` is an edge to ``pkg.name`` when that
is a module, else to ``pkg``. Importing ``pkg.mod`` also runs ``pkg/__init__``,
but that implicit edge is not counted: a package's ``__init__`` re-exports its
modules, and counting it would make every sibling import a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY, SERVICE = "libs", "services"
GROUND = ("core", "telemetry")
# What each library package may import besides itself; "*" is any library package but these.
FLOORS: Mapping[str, tuple[str, ...]] = {
    "core": (),
    "telemetry": ("core",),
    "sdk": GROUND,
    "*": (*GROUND, "*"),
}
NOT_FROM_ADAPTERS = ("sdk",)


@dataclass(frozen=True)
class Module:
    name: str
    layer: str
    path: Path


def modules(root: Path) -> dict[str, Module]:
    """Every ``cogsub`` module under ``root/libs`` and ``root/services``, by dotted name."""
    found = {}
    for layer in (LIBRARY, SERVICE):
        for path in sorted((root / layer).rglob("*.py")):
            parts = list(path.relative_to(root / layer).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            found[name] = Module(name, layer, path)
    return found


def imported_names(module: Module) -> set[str]:
    """The absolute names ``module`` imports, wherever in the file the import is."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*parts, node.module] if node.module else parts)


def edges(found: Mapping[str, Module]) -> dict[str, set[str]]:
    """Module → the modules it imports (the nearest enclosing module of each name)."""
    graph = {}
    for name, module in found.items():
        targets = {_nearest(imported, found) for imported in imported_names(module)}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _nearest(name: str, found: Mapping[str, Module]) -> str | None:
    """``name`` if it is a module, else the module it is an attribute of."""
    while name and name not in found:
        name = name.rpartition(".")[0]
    return name or None


def library_to_service(found: Mapping[str, Module], graph: Mapping[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if found[source].layer == LIBRARY and found[target].layer == SERVICE
    )


def floor_breaches(found: Mapping[str, Module], graph: Mapping[str, set[str]]) -> list[str]:
    """Library imports that reach above the importer's floor (see the module docstring)."""
    breaches = []
    for source, targets in graph.items():
        if found[source].layer != LIBRARY:
            continue
        own = _package(source)
        for target in targets:
            theirs = _package(target)
            if found[target].layer == LIBRARY and theirs != own and not _allowed(own, theirs):
                breaches.append(f"{source} -> {target}")
    return sorted(breaches)


def _package(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _allowed(importer: str, imported: str) -> bool:
    allowed = FLOORS.get(importer, FLOORS["*"])
    if imported in allowed:
        return True
    special = set(FLOORS) - {"*"}
    return "*" in allowed and imported not in special and imported not in NOT_FROM_ADAPTERS


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import one another (strongly connected, two or more)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative Tarjan: the graph is deep enough to trouble the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        _enter(start, order, low, stack, on_stack)
        while work:
            node, successors = work[-1]
            nxt = next(successors, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    _close(node, stack, on_stack, found)
            elif nxt not in order:
                _enter(nxt, order, low, stack, on_stack)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt in on_stack:
                low[node] = min(low[node], order[nxt])

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return sorted(found)


def _enter(
    node: str, order: dict[str, int], low: dict[str, int], stack: list[str], on: set[str]
) -> None:
    order[node] = low[node] = len(order)
    stack.append(node)
    on.add(node)


def _close(node: str, stack: list[str], on: set[str], found: list[list[str]]) -> None:
    group = []
    while True:
        member = stack.pop()
        on.discard(member)
        group.append(member)
        if member == node:
            break
    if len(group) > 1:
        found.append(sorted(group))


# --- the project -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project() -> tuple[dict[str, Module], dict[str, set[str]]]:
    found = modules(ROOT)
    return found, edges(found)


def test_the_walk_sees_both_layers(project) -> None:
    found, graph = project
    layers = {m.layer for m in found.values()}
    assert layers == {LIBRARY, SERVICE}
    assert "cogsub.core.errors" in graph["cogsub.sdk._errors"]


def test_no_library_imports_a_service(project) -> None:
    assert library_to_service(*project) == []


def test_every_library_stays_on_its_floor(project) -> None:
    assert floor_breaches(*project) == []


def test_no_modules_import_each_other(project) -> None:
    _, graph = project
    assert cycles(graph) == []


# --- the checker itself, on a made-up tree ------------------------------------------------


def _tree(root: Path, files: Mapping[str, str]) -> dict[str, set[str]]:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return edges(modules(root))


def _lines(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_a_lazy_import_of_a_service_is_an_edge(tmp_path) -> None:
    graph = _tree(
        tmp_path,
        {
            "libs/cogsub/sdk/client.py": _lines(
                "def embedded():", "    from cogsub.runtime import wiring"
            ),
            "services/cogsub/runtime/__init__.py": "",
            "services/cogsub/runtime/wiring.py": "",
        },
    )
    found = modules(tmp_path)
    assert library_to_service(found, graph) == ["cogsub.sdk.client -> cogsub.runtime.wiring"]


def test_a_type_only_import_closes_a_cycle(tmp_path) -> None:
    graph = _tree(
        tmp_path,
        {
            "services/cogsub/recall/fusion.py": _lines(
                "from typing import TYPE_CHECKING",
                "if TYPE_CHECKING:",
                "    from cogsub.recall.ranking import RankingPolicy",
            ),
            "services/cogsub/recall/ranking.py": "from .fusion import fuse\n",
        },
    )
    assert cycles(graph) == [["cogsub.recall.fusion", "cogsub.recall.ranking"]]


def test_a_package_init_reexporting_its_modules_is_no_cycle(tmp_path) -> None:
    graph = _tree(
        tmp_path,
        {
            "libs/cogsub/bus/__init__.py": "from cogsub.bus.memory import Bus\n",
            "libs/cogsub/bus/memory.py": "from cogsub.bus.ports import Port\n",
            "libs/cogsub/bus/ports.py": "",
        },
    )
    assert graph["cogsub.bus"] == {"cogsub.bus.memory"}
    assert cycles(graph) == []


@pytest.mark.parametrize(
    ("importer", "imported", "breach"),
    [
        ("telemetry/lag.py", "cogsub.bus.ports", True),
        ("core/errors.py", "cogsub.telemetry.tracing", True),
        ("sdk/client.py", "cogsub.index.ports", True),
        ("index/sqlite.py", "cogsub.sdk.client", True),
        ("index/sqlite.py", "cogsub.telemetry.tracing", False),
        ("bus/kafka.py", "cogsub.core.headers", False),
        ("sdk/client.py", "cogsub.core.errors", False),
    ],
)
def test_floors(tmp_path, importer: str, imported: str, breach: bool) -> None:
    target = "libs/" + imported.replace(".", "/") + ".py"
    graph = _tree(tmp_path, {f"libs/cogsub/{importer}": f"import {imported}\n", target: ""})
    found = modules(tmp_path)
    assert bool(floor_breaches(found, graph)) is breach
