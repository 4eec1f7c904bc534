"""Which changes to configuration objects the scheduler's configuration depends on.

The queue controller rebuilds the scheduler's configuration when a ResourceFlavor, ClusterQueue, LocalQueue
or other configuration object changes. It also writes those objects' statuses itself (pending and admitted
counts, quota in use), many times a second under load; a rebuild after each would cost more than the
scheduling. The configuration is made from everything but ``status`` (and the resourceVersion that any write
bumps), so a change that leaves those as they were is no change to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flexq.store import Change, ChangeType, Key

__all__ = ["ConfigView"]


def _shape(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}


class ConfigView:
    """The configuration objects as last read, without their statuses."""

    def __init__(self) -> None:
        self._seen: dict[Key, dict[str, Any]] = {}

    def reset(self, objects: Iterable[tuple[Key, Mapping[str, Any]]]) -> None:
        """Everything was read afresh: remember what was read."""
        self._seen = {key: _shape(obj) for key, obj in objects}

    def changed(self, change: Change) -> bool:
        """Whether ``change`` alters the configuration (remembering it if so)."""
        if change.type is ChangeType.DELETED:
            self._seen.pop(change.key, None)
            return True
        shape = _shape(change.obj)
        if self._seen.get(change.key) == shape:
            return False
        self._seen[change.key] = shape
        return True
