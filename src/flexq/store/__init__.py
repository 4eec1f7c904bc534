"""Durable state: objects, resourceVersions, the change log that watches and controllers read, Events.

Import Lease from flexq.store.lease and PostgresStore from flexq.store.postgres (they load psycopg).
"""

from flexq.store.base import BaseStore
from flexq.store.recorder import record_event
from flexq.store.refusals import AlreadyExists, Conflict, Gone, Key, NotFound, StoreError, StoreUnavailable
from flexq.store.sqlite import Change, ChangeType, Store, rfc3339
from flexq.store.url import StoreOptionError, is_postgres, open_store, shown

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
    "StoreOptionError",
    "StoreUnavailable",
    "is_postgres",
    "open_store",
    "record_event",
    "rfc3339",
    "shown",
]
