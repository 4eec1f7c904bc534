"""Durable state: objects, resourceVersions, the change log that watches and controllers read, Events.

PostgreSQL's store and lease load psycopg (an extra): :func:`open_store` and :func:`open_lease` open them from a
``--store`` URL.
"""

from flexq.store.base import BaseStore
from flexq.store.codec import loads
from flexq.store.foreign import ForeignTx, commit_foreign
from flexq.store.holder import LeaseLike
from flexq.store.recorder import event_note, record_event, record_events
from flexq.store.refusals import AlreadyExists, Conflict, Gone, Key, NotFound, Stale, StoreError, StoreUnavailable
from flexq.store.replica import Committer, ReplicaStore
from flexq.store.sqlite import Change, ChangeType, Store, rfc3339
from flexq.store.sqlite_lease import SqliteLease
from flexq.store.url import StoreOptionError, is_postgres, open_lease, open_store, shown, sqlite_path

__all__ = [
    "AlreadyExists",
    "BaseStore",
    "Change",
    "ChangeType",
    "Committer",
    "Conflict",
    "ForeignTx",
    "Gone",
    "Key",
    "LeaseLike",
    "NotFound",
    "ReplicaStore",
    "SqliteLease",
    "Stale",
    "Store",
    "StoreError",
    "StoreOptionError",
    "StoreUnavailable",
    "commit_foreign",
    "event_note",
    "is_postgres",
    "loads",
    "open_lease",
    "open_store",
    "record_event",
    "record_events",
    "rfc3339",
    "shown",
    "sqlite_path",
]
