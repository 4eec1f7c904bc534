"""Durable state: objects, resourceVersions, the change log that watches and controllers read, Events.

Import Lease from flexq.store.lease and PostgresStore from flexq.store.postgres (they load psycopg).
"""

from flexq.store.base import BaseStore
from flexq.store.codec import loads
from flexq.store.holder import LeaseLike
from flexq.store.recorder import event_note, record_event, record_events
from flexq.store.refusals import AlreadyExists, Conflict, Gone, Key, NotFound, StoreError, StoreUnavailable
from flexq.store.sqlite import Change, ChangeType, Store, rfc3339
from flexq.store.sqlite_lease import SqliteLease
from flexq.store.url import StoreOptionError, is_postgres, open_store, shown, sqlite_path

__all__ = [
    "AlreadyExists",
    "BaseStore",
    "Change",
    "ChangeType",
    "Conflict",
    "Gone",
    "Key",
    "LeaseLike",
    "NotFound",
    "SqliteLease",
    "Store",
    "StoreError",
    "StoreOptionError",
    "StoreUnavailable",
    "event_note",
    "is_postgres",
    "loads",
    "open_store",
    "record_event",
    "record_events",
    "rfc3339",
    "shown",
    "sqlite_path",
]
