"""Unknown fields: found against the object schemas, refused, warned about or dropped, as the API server does.

kubectl sends ``fieldValidation=Strict`` by default: a field the schema does not declare (a typo such as
``spec.resourceGroup``) is refused with ``strict decoding error: unknown field "spec.resourceGroup"``.
``Warn`` (the API server's default when a request names none) drops it and says so in a ``Warning`` header;
``Ignore`` drops it silently. Dropping is what the API server does to a custom resource's undeclared fields.

A model's declared fields are its pydantic fields plus ``more_fields``: fields Kubernetes (or Kueue, KubeRay)
declares that flexq keeps as written without reading them. Under a field typed ``dict[str, Any]``, anything
goes; ``status`` is the controllers' and is not checked.
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from pydantic import BaseModel

from flexq.api.documents import Document, format_path
from flexq.api.jsoncopy import copy_json
from flexq.api.object_errors import ApiError, FieldError

__all__ = ["FieldCheck", "FieldValidation", "UnknownFields", "parse_field_validation", "prune", "strict_errors",
           "unknown_fields"]


class FieldValidation(enum.StrEnum):
    STRICT = "Strict"
    WARN = "Warn"
    IGNORE = "Ignore"


def parse_field_validation(value: str | None, default: FieldValidation = FieldValidation.WARN) -> FieldValidation:
    """The ``fieldValidation`` query parameter; ValueError naming the accepted values for any other."""
    if value is None or value == "":
        return default
    for mode in FieldValidation:
        if value == mode.value:
            return mode
    raise ValueError(f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", "Warn", "Strict"')


def _shape(annotation: Any) -> Any:
    """``annotation`` reduced to a model class, ("list", inner), ("dict", inner), or None (anything goes)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _shape(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        for member in typing.get_args(annotation):
            shape = _shape(member)
            if shape is not None:
                return shape
        return None
    if origin is list:
        inner = _shape(typing.get_args(annotation)[0])
        return ("list", inner) if inner is not None else None
    if origin is dict:
        inner = _shape(typing.get_args(annotation)[1])
        return ("dict", inner) if inner is not None else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


_NOTHING: Any = object()
"""A declared field kept as written, not walked (a ``more_fields`` name, or one typed ``dict[str, Any]``)."""


@functools.cache
def _children(model: type[BaseModel]) -> dict[str, Any]:
    """Every field ``model`` declares (by its alias where it has one), with the shape to walk under it (``_NOTHING``:
    none). Worked out once a model: a create or a patch walks its whole body."""
    out: dict[str, Any] = dict.fromkeys(getattr(model, "more_fields", frozenset()), _NOTHING)
    for name, info in model.model_fields.items():
        shape = _shape(info.annotation)
        out[info.alias or name] = _NOTHING if shape is None else shape
    return out


Undeclared = Callable[[dict[str, Any], str, list[str | int]], None]
"""A visitor of undeclared fields: called with the mapping that holds one, its key, and its path."""


def _walk(shape: Any, value: Any, path: list[str | int], undeclared: Undeclared) -> None:
    """Call ``undeclared`` for every field under ``value`` that ``shape`` does not declare (not under status)."""
    if isinstance(shape, tuple):
        kind, inner = shape
        if kind == "list" and isinstance(value, list):
            for i, item in enumerate(value):
                _walk(inner, item, [*path, i], undeclared)
        elif kind == "dict" and isinstance(value, dict):
            for key, item in value.items():
                _walk(inner, item, [*path, str(key)], undeclared)
        return
    if not isinstance(value, dict):
        return
    children = _children(shape)
    for key in list(value):  # a copy: the visitor may drop the key
        if not path and key == "status":
            continue
        inner = children.get(key)
        if inner is None:
            undeclared(value, key, [*path, str(key)])
        elif inner is not _NOTHING:
            _walk(inner, value[key], [*path, key], undeclared)


def unknown_fields(model: type[BaseModel], obj: dict[str, Any]) -> list[str]:
    """Paths (``spec.resourceGroups[0].flavorz``) of the fields of ``obj`` that ``model`` does not declare."""
    out: list[str] = []
    _walk(model, obj, [], lambda _parent, _key, path: out.append(format_path(path)))
    return out


def strict_errors(model: type[BaseModel], doc: Document) -> list[FieldError]:
    """A strict decoding error for each field of ``doc`` that ``model`` does not declare, with its line (what
    ``flexq apply`` and ``kubectl apply`` refuse)."""
    return [FieldError(p, f'unknown field "{p}" (strict decoding error)', doc.line_of(p))
            for p in unknown_fields(model, doc.obj)]


def prune(obj: dict[str, Any], paths: list[str], model: type[BaseModel]) -> dict[str, Any]:
    """A copy of ``obj`` without the undeclared fields (``paths`` as :func:`unknown_fields` gave them)."""
    if not paths:
        return obj
    drop = set(paths)
    pruned = copy_json(obj)

    def remove(parent: dict[str, Any], key: str, path: list[str | int]) -> None:
        if format_path(path) in drop:
            del parent[key]

    _walk(model, pruned, [], remove)
    return pruned


class UnknownFields(ApiError):
    """Fields the schema does not declare, or keys the body repeats, under ``fieldValidation=Strict``: the API
    server's 400."""

    def __init__(self, kind: str, version: str, paths: list[str], duplicates: list[str] | None = None) -> None:
        self.paths = paths
        listed = ", ".join([*(duplicates or []), *(f'unknown field "{p}"' for p in paths)])
        super().__init__(f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: '
                         f"{listed}")


@dataclass(slots=True)
class FieldCheck:
    """One request's field validation: its mode, the keys its body repeats (``duplicate field "name"``, as the
    request's reader found them), and the warnings it gave (for ``Warning`` headers)."""

    mode: FieldValidation
    warnings: list[str] = dataclass_field(default_factory=list)
    duplicates: list[str] = dataclass_field(default_factory=list)

    def check(self, model: type[BaseModel], obj: dict[str, Any], kind: str, version: str) -> dict[str, Any]:
        """``obj`` without undeclared fields; :class:`UnknownFields` under Strict (for repeated keys too)."""
        paths = unknown_fields(model, obj)
        duplicates, self.duplicates = self.duplicates, []  # told once, by the first check
        if not paths and not duplicates:
            return obj
        if self.mode is FieldValidation.STRICT:
            raise UnknownFields(kind, version, paths, duplicates)
        if self.mode is FieldValidation.WARN:
            self.warnings.extend(duplicates)
            self.warnings.extend(f'unknown field "{p}"' for p in paths)
        return prune(obj, paths, model)
