"""One committed write as the change log holds it: its resourceVersion, type, key and the object's text."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from flexq.store.codec import loads
from flexq.store.refusals import Key

__all__ = ["CHANGE_TYPES", "Change", "ChangeType", "LogRow", "from_rows"]

LogRow = tuple[int, str, str, str, str, str, str]
"""A row of the change log: rv, type, group, resource, namespace, name, body."""


class ChangeType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


CHANGE_TYPES: dict[str, ChangeType] = {t.value: t for t in ChangeType}
"""A change type by its name, looked up faster than ``ChangeType(name)`` (every change read is typed so)."""


class Change:
    """One committed write. ``obj`` is parsed from the stored text when first read, for this reader alone:
    readers may change what they are given without reaching anyone else."""

    __slots__ = ("_body", "_obj", "key", "rv", "type")

    def __init__(self, rv: int, type: ChangeType, key: Key, body: str) -> None:
        self.rv = rv
        self.type = type
        self.key = key
        self._body = body
        self._obj: dict[str, Any] | None = None

    @property
    def obj(self) -> dict[str, Any]:
        if self._obj is None:
            self._obj = loads(self._body)
        return self._obj

    @property
    def text(self) -> str:
        """The object as stored: compact JSON text."""
        return self._body

    def __repr__(self) -> str:
        return f"Change({self.rv}, {self.type.value}, {self.key})"


def from_rows(rows: list[LogRow]) -> list[Change]:
    """The changes of rows of the change log."""
    return [Change(int(rv), CHANGE_TYPES[t], Key(g, r, ns, n), body) for rv, t, g, r, ns, n, body in rows]
