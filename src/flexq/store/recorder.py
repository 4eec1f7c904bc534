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

__all__ = ["record_event"]


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
    meta = involved.get("metadata", {})
    namespace = meta.get("namespace") or "default"
    digest = hashlib.sha1(f"{meta.get('uid', '')}|{reason}|{message}".encode()).hexdigest()[:16]
    name = f"{meta.get('name', 'object')}.{digest}"
    key = Key("", "events", namespace, name)
    with store.transaction():
        stamp = rfc3339(now) if now is not None else store.timestamp()
        try:
            return store.create(key, {
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
            }, echo=echo)
        except AlreadyExists:  # a repeat: counted on the one Event
            event = store.get(key)
            event["count"] = int(event.get("count", 1)) + 1
            event["lastTimestamp"] = rfc3339(now) if now is not None else event["lastTimestamp"]
            event["metadata"].pop("resourceVersion", None)
            return store.update(key, event, keep_status=False, echo=echo)
