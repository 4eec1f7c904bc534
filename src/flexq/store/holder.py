"""A controllers' lease as read from any store: who holds it, and the shape of a lease (PostgreSQL's in
:mod:`flexq.store.lease`, SQLite's in :mod:`flexq.store.sqlite_lease`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

__all__ = ["Holder", "LeaseLike"]


@dataclass(frozen=True)
class Holder:
    """The lease as read: who holds it, since when, when it was renewed, for how long, how often it changed
    hands; ``expired`` when its holder let it lapse."""

    holder: str
    acquired: datetime
    renewed: datetime
    duration: float
    transitions: int
    expired: bool


class LeaseLike(Protocol):
    kind: str
    """The store the lease is in: ``postgresql`` or ``sqlite``."""
    name: str
    identity: str
    duration: float

    def acquire(self) -> bool: ...

    def release(self) -> None: ...

    def read(self) -> Holder | None: ...

    def close(self) -> None: ...
