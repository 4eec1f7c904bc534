"""Tests share helpers through tests/support (and the few modules made to be shared), never by importing another
test module's private helpers: a helper two test modules need is named, documented and kept in one place."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def private_imports(root: Path) -> list[str]:
    """``file: from module import _name`` for every private name a test file imports from another test module."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("tests."):
                continue
            if not node.module.rpartition(".")[2].startswith("test_"):
                continue
            found.extend(f"{path.relative_to(root)}: from {node.module} import {a.name}" for a in node.names
                         if a.name.startswith("_"))
    return found


def test_no_test_imports_another_test_modules_private_helpers() -> None:
    assert private_imports(TESTS) == []


def test_the_check_finds_a_private_import(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("from tests.controller.test_live import _helper, shared\n")
    (tmp_path / "test_b.py").write_text("from tests.support import eventually\nfrom tests.queues import _x\n")
    assert private_imports(tmp_path) == ["test_a.py: from tests.controller.test_live import _helper"]
