"""Copies of JSON-shaped data (what a Kubernetes object is: dicts, lists and immutable scalars).

``copy.deepcopy`` handles any object graph (shared references, cycles, custom types) and pays for it: on a typical
object it is three times slower than copying the dicts and lists alone, which is all a document needs. The API
copies each object several times per request (normalizing, converting, patching), so this is the copy it uses.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["copy_json"]

T = TypeVar("T")


def copy_json(value: T) -> T:
    """``value`` with every dict and list in it copied; anything else (strings, numbers, booleans, None, or an
    immutable value such as a date YAML read) is shared, as it cannot change."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [copy_json(v) for v in value]  # type: ignore[return-value]
    return value
