"""Faces that import on first use (flexq.faces): each offers exactly what its ``TYPE_CHECKING`` imports name, and
each name is the object its module defines."""

from __future__ import annotations

import importlib
import os.path
import subprocess
import sys
import types
from pathlib import Path

import pytest

from flexq.faces import lazy_face

LAZY = ("flexq.api", "flexq.objects", "flexq.server")


@pytest.mark.parametrize("name", LAZY)
def test_a_lazy_face_offers_what_it_imports_for_type_checkers(name: str) -> None:
    package = importlib.import_module(name)
    assert sorted(dir(package)) == sorted(package.__all__)
    for attribute in package.__all__:
        value = getattr(package, attribute)
        homes = [m for m in sys.modules.values()
                 if m is not None and m.__name__.startswith(name + ".") and m.__dict__.get(attribute) is value]
        assert homes, f"{name}.{attribute} is not the object of any of its modules"


@pytest.mark.parametrize("name", LAZY)
def test_a_name_not_on_a_lazy_face_is_an_attribute_error(name: str) -> None:
    package = importlib.import_module(name)
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


def test_lazy_face_reads_only_the_type_checking_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    init = tmp_path / "__init__.py"
    init.write_text("from typing import TYPE_CHECKING\nfrom os import sep\n"
                    "if TYPE_CHECKING:\n    from os.path import join as joined, split\n")
    probe = types.ModuleType("probe_face")
    monkeypatch.setitem(sys.modules, "probe_face", probe)
    getattr_, dir_ = lazy_face("probe_face", str(init))
    assert dir_() == ["joined", "split"]
    assert getattr_("split") is os.path.split and probe.split is os.path.split  # kept on the package
    assert getattr_("joined") is os.path.join
    with pytest.raises(AttributeError, match="module 'probe_face' has no attribute 'join'"):
        getattr_("join")  # imported under another name
    with pytest.raises(AttributeError):
        getattr_("sep")  # imported outside the block


def test_the_command_line_does_not_build_the_object_schemas() -> None:
    """Loading flexq's command line loads neither pydantic, the object schemas nor the store: a command that only
    talks to a server starts in about half the time."""
    probe = ("import sys, flexq.cli.main; print(sorted(m for m in ('pydantic', 'flexq.api.models', 'flexq.store', "
             "'flexq.objects.service') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["[]"], out.stderr


def test_every_kind_names_the_schema_of_its_objects() -> None:
    from pydantic import BaseModel

    from flexq.api import KINDS

    for info in KINDS:
        assert issubclass(info.model, BaseModel) and info.model.__name__ == info.kind, info.schema
