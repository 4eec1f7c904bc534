"""Package faces that import a name when it is first used.

A package whose face stands in front of heavy modules (the object schemas, the store) lists that face as imports
under ``TYPE_CHECKING``, which readers and type checkers see, and hands attribute lookups to :func:`lazy_face`,
which imports each name's module on first use. So a command line that names a kind or prints a table does not
build every pydantic model first, and the face stays the one list of what the package offers.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["lazy_face"]


def lazy_face(package: str, init_file: str) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``, whose ``__init__`` is ``init_file``: each name the
    ``if TYPE_CHECKING:`` block imports is imported from its module when first read, then kept on the package."""
    homes = _homes(Path(init_file).read_text(encoding="utf-8"))

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home[0]), home[1])
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(homes)

    return __getattr__, __dir__


def _homes(source: str) -> dict[str, tuple[str, str]]:
    """Name on the face -> (module, name there), for the ``from M import N [as A]`` statements of the module-level
    ``if TYPE_CHECKING:`` block."""
    homes: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                    module = statement.module
                    homes.update((alias.asname or alias.name, (module, alias.name)) for alias in statement.names)
    return homes
