"""Durable state: objects, resourceVersions, the change log that watches and controllers read, Events."""

from flexq.store.base import BaseStore
from flexq.store.errors import AlreadyExists, Conflict, Gone, Key, NotFound, StoreError, StoreUnavailable
from flexq.store.events import record_event
from flexq.store.sqlite import Change, ChangeType, Store, rfc3339

__all__ = [
    "AlreadyExists",
    "BaseStore",
    "Change",
    "ChangeType",
    "Conflict",
    "Gone",
    "Key",
    "NotFound",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "record_event",
    "rfc3339",
]
