"""The import graph: every arrow between flexq's packages runs down its layers, and no module imports itself
through others (type-only imports count: a circle of them is one object split across files)."""

from __future__ import annotations

import ast
from pathlib import Path

import flexq

ROOT = Path(flexq.__file__).parent

LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "demo", "ui"),
    ("server", "export", "importer"),
    ("client",),
    ("controller", "sim"),
    ("forecast",),
    ("control",),
    ("capacity", "jobs", "runtime"),
    ("scheduler",),
    ("objects",),
    ("api", "store", "auth"),
    ("config", "clock", "timers", "durations"),
    ("errors", "faces"),
)
"""flexq's layers, top first: a package imports only packages of lower layers, or of its own where no circle
forms. Every top-level package and module is in one."""

RANK = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    """The flexq modules ``path`` (module ``name``) imports, type-only imports included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("flexq."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up) + (f".{base}" if base else "")
            if base == "flexq" or base.startswith("flexq."):
                found.update(f"{base}.{a.name}" for a in node.names)
                found.add(base)
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the flexq modules it imports (names that are not modules resolve to their module)."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    return {name: {target for target in _imports(path, name) if target in paths and target != name}
            for name, path in paths.items()}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                member, circle = "", []
                while member != node:
                    member = stack.pop()
                    on_stack.discard(member)
                    circle.append(member)
                if len(circle) > 1:
                    found.append(sorted(circle))
    return found


def test_every_package_and_module_has_a_layer() -> None:
    tops = {_top(name) for name in graph()} - {""}
    assert sorted(tops - set(RANK)) == [], "place these in LAYERS"
    assert sorted(set(RANK) - tops) == [], "LAYERS names what is not there"


def test_every_arrow_between_packages_runs_down() -> None:
    upward = sorted(f"{source} -> {target}" for source, targets in graph().items() for target in targets
                    if _top(source) and _top(target) and _top(source) != _top(target)
                    and RANK[_top(target)] < RANK[_top(source)])
    assert upward == []


def test_packages_meet_through_their_faces() -> None:
    """A module imports another package's names from that package (``from flexq.capacity import CapacityDriver``, or a
    subpackage's face, ``from flexq.api.models import Quantity``), never from the module behind it; inside a function
    too (the CLI keeps its start quick by importing what a command needs when it runs, from faces that import a name
    when it is first used where their modules are heavy: :mod:`flexq.faces`)."""
    reaches = []
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("flexq."):
                module = node.module or ""
                face = (ROOT.parent / module.replace(".", "/") / "__init__.py").exists()
                if module.count(".") >= 2 and not face and _top(module) != _top(name):
                    reaches.append(f"{name}: from {module} import ...")
    assert reaches == []


def test_no_module_imports_itself_through_others() -> None:
    assert circles(graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(edges) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
