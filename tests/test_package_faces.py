"""The package faces: every exception flexq defines derives from :class:`flexq.errors.FlexqError`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import flexq
from flexq.errors import FlexqError

_OPTIONAL = ("ray", "jax", "jaxlib")  # a module that needs these is skipped where they are not installed


def _modules() -> list[ModuleType]:
    """Every module of flexq that imports here."""
    found: list[ModuleType] = [flexq]
    for info in pkgutil.walk_packages(flexq.__path__, "flexq."):
        try:
            found.append(importlib.import_module(info.name))
        except ImportError as exc:
            if (exc.name or "").split(".")[0] not in _OPTIONAL:
                raise
    return found


def test_every_exception_flexq_defines_derives_from_flexq_error() -> None:
    strays = sorted(
        f"{module.__name__}.{name}"
        for module in _modules()
        for name, value in vars(module).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__
        and not issubclass(value, FlexqError)
    )
    assert strays == []
