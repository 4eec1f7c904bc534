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
    """The configuration objects as last read: the configuration is rebuilt from them, not from a listing of the
    store (a thousand ClusterQueues parsed again at every change to one of them)."""

    def __init__(self) -> None:
        self._seen: dict[Key, dict[str, Any]] = {}
        """Each object without its status: what the configuration is made from."""
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {}
        """Each object as last read, by kind (its status may be older than the store's: unused)."""

    def reset(self, objects: Iterable[tuple[str, Key, dict[str, Any]]]) -> None:
        """Everything was read afresh (kind, key, object): remember what was read."""
        self._seen, self._objects = {}, {}
        for kind, key, obj in objects:
            self._seen[key] = _shape(obj)
            self._objects.setdefault(kind, {})[key] = obj

    def changed(self, kind: str, change: Change) -> bool:
        """Whether ``change`` (to an object of ``kind``) alters the configuration (remembering it if so)."""
        if change.type is ChangeType.DELETED:
            self._seen.pop(change.key, None)
            self._objects.get(kind, {}).pop(change.key, None)
            return True
        obj = change.obj
        shape = _shape(obj)
        self._objects.setdefault(kind, {})[change.key] = obj
        if self._seen.get(change.key) == shape:
            return False
        self._seen[change.key] = shape
        return True

    def objects(self, kinds: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        """The objects of each of ``kinds``, in the store's order (by namespace, then name). Read, not changed:
        they are the view's own."""
        return {kind: [obj for _key, obj in sorted(self._objects.get(kind, {}).items(),
                                                   key=lambda item: (item[0].namespace, item[0].name))]
                for kind in kinds}
