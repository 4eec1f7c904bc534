"""Kubernetes-style Events: reason, message, count, first and last seen, per involved object.

An Event is an ordinary ``v1`` object in the store (so ``kubectl get events`` and ``describe`` read it).
Repeats of the same reason and message for the same object update one Event: its ``count`` and
``lastTimestamp``, as the API server's event correlator does.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from flexq.store.base import BaseStore, rfc3339
from flexq.store.refusals import AlreadyExists, Key

__all__ = ["event_note", "record_event", "record_events"]


def event_note(involved: dict[str, Any], reason: str, message: str, stamp: str, *, type: str = "Normal",
               component: str = "flexq") -> tuple[Key, dict[str, Any]]:
    """The Event about ``involved`` to record (its key, and its body as first written): one per object, reason and
    message."""
    meta = involved.get("metadata", {})
    namespace = meta.get("namespace") or "default"
    digest = hashlib.sha1(f"{meta.get('uid', '')}|{reason}|{message}".encode()).hexdigest()[:16]
    name = f"{meta.get('name', 'object')}.{digest}"
    return Key("", "events", namespace, name), {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", ""),
            "kind": involved.get("kind", ""),
            "name": meta.get("name", ""),
            **({"namespace": meta["namespace"]} if meta.get("namespace") else {}),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": type,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": component},
        "reportingComponent": component,
    }


def record_event(
    store: BaseStore,
    involved: dict[str, Any],
    reason: str,
    message: str,
    *,
    type: str = "Normal",
    component: str = "flexq",
    now: datetime | None = None,
    echo: bool = False,
) -> dict[str, Any]:
    """Record (or count again) an Event about ``involved``; return the Event as written (``echo``: a copy of its
    own, as stored)."""
    with store.transaction():
        stamp = rfc3339(now) if now is not None else store.timestamp()
        key, body = event_note(involved, reason, message, stamp, type=type, component=component)
        try:
            return store.create(key, body, echo=echo)
        except AlreadyExists:  # a repeat: counted on the one Event, seen last now
            return _count(store, key, 1, stamp, echo)


def record_events(store: BaseStore, notes: list[tuple[Key, dict[str, Any]]]) -> None:
    """Record Events made with :func:`event_note` together, in one transaction: the new ones in one go, each repeat
    (of a stored Event, or of one given before it) counted on its Event."""
    if not notes:
        return
    merged: dict[Key, tuple[dict[str, Any], int]] = {}
    for key, body in notes:
        first, count = merged.get(key, (body, 0))
        if count:
            first = {**first, "count": count + 1, "lastTimestamp": body["lastTimestamp"]}
        merged[key] = (first, count + 1)
    with store.transaction():
        existed = store.create_many([(key, body) for key, (body, _) in merged.items()])
        for key in existed:
            body, count = merged[key]
            _count(store, key, count, body["lastTimestamp"], False)


def _count(store: BaseStore, key: Key, more: int, stamp: str, echo: bool) -> dict[str, Any]:
    """``more`` repeats of the stored Event at ``key``, the last at ``stamp`` (read once: the caller's transaction
    holds the store, so the Event read is the one its update replaces)."""
    stored = store.get(key)
    meta = {k: v for k, v in stored["metadata"].items() if k != "resourceVersion"}
    event = {**stored, "metadata": meta, "count": int(stored.get("count", 1)) + more, "lastTimestamp": stamp}
    return store.update(key, event, keep_status=False, echo=echo, current=stored)
