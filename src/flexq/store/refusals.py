"""Errors of the store.

::

    StoreError
    ├── NotFound        no object under that key
    ├── AlreadyExists   create of a key that is taken
    ├── Conflict        update with a stale resourceVersion
    ├── Gone            a watch asked to resume from a change that was compacted away
    ├── Stale           an optimistic transaction read what another write has changed since: run it again
    └── StoreUnavailable  a write the database refused: the disk is full, or another process holds its lock
"""

from __future__ import annotations

from dataclasses import dataclass

from flexq.errors import FlexqError

__all__ = ["AlreadyExists", "Conflict", "Gone", "Key", "NotFound", "Stale", "StoreError", "StoreUnavailable"]


@dataclass(frozen=True, slots=True)
class Key:
    """Where an object lives: API group, resource (plural), namespace ("" if cluster-scoped), name."""

    group: str
    resource: str
    namespace: str
    name: str

    def __str__(self) -> str:
        gr = f"{self.resource}.{self.group}" if self.group else self.resource
        where = f"{self.namespace}/" if self.namespace else ""
        return f'{gr} "{where}{self.name}"'


class StoreError(FlexqError):
    """Base of the store's errors."""


class NotFound(StoreError):
    def __init__(self, key: Key) -> None:
        self.key = key
        super().__init__(f"{key} not found")


class AlreadyExists(StoreError):
    def __init__(self, key: Key) -> None:
        self.key = key
        super().__init__(f"{key} already exists")


class Conflict(StoreError):
    def __init__(self, key: Key, given: str, current: str) -> None:
        self.key = key
        self.given = given
        self.current = current
        super().__init__(
            f"Operation cannot be fulfilled on {key}: the object has been modified; "
            "please apply your changes to the latest version and try again"
        )


class Gone(StoreError):
    def __init__(self, since: int, oldest: int) -> None:
        self.since = since
        self.oldest = oldest
        super().__init__(f"too old resource version: {since} ({oldest})")


class Stale(StoreError):
    """An optimistic transaction (one an API worker prepared on its own replica, see :mod:`flexq.store.foreign`)
    read an object or a listing that another write changed before it could commit: nothing of it was written; it is
    run again on the newer state, as the Kubernetes API server runs an update again on a conflict it caused itself.
    ``rv``: the store's resourceVersion when it was refused (the replica reads at least as far before trying again)."""

    def __init__(self, key: Key | None, rv: int) -> None:
        self.key = key
        self.rv = rv
        super().__init__(f"{key or 'a listing'} changed while the write was prepared (at {rv})")


class StoreUnavailable(StoreError):
    """A write the database refused (``reason``: ``DiskFull``, ``Locked`` or ``WriteFailed``): nothing of it was
    kept, what was committed before is intact and still readable; the write may be tried again later."""

    def __init__(self, message: str, reason: str) -> None:
        self.reason = reason
        super().__init__(message)
