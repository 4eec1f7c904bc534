"""``flexq server --store``: which store a server opens.

- none: SQLite in ``FLEXQ_HOME/flexq.db`` (one server);
- ``sqlite:///PATH`` (or a plain path): SQLite in that file;
- ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`` (or ``postgres://``): PostgreSQL, which several servers
  share (one leads the controllers, see :mod:`flexq.store.lease`).

A server's SQLite store keeps room for deletes beside its file (:mod:`flexq.store.reserve`).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from flexq.store.base import BaseStore
from flexq.store.holder import LeaseLike
from flexq.store.refusals import StoreError
from flexq.store.reserve import RESERVE
from flexq.store.sqlite import Store
from flexq.store.sqlite_lease import SqliteLease

__all__ = ["StoreOptionError", "is_postgres", "open_lease", "open_store", "shown"]

_POSTGRES = ("postgresql://", "postgres://")


class StoreOptionError(StoreError):
    """``--store`` is malformed, or its store cannot be opened (the message names the option)."""


def is_postgres(spec: str | None) -> bool:
    return spec is not None and spec.startswith(_POSTGRES)


def shown(spec: str) -> str:
    """``spec`` with any password masked, for messages."""
    return re.sub(r"^(\w+://[^:/@]*):[^@/]*@", r"\1:***@", spec)


def sqlite_path(spec: str | None, home: Path) -> Path | None:
    """The SQLite file ``--store`` names (the state directory's by default); None for PostgreSQL."""
    if spec is None:
        return home / "flexq.db"
    if is_postgres(spec):
        return None
    return Path(spec.removeprefix("sqlite://")).expanduser()


def open_store(spec: str | None, home: Path, *, follow: float = 0.0) -> BaseStore:
    """The store ``spec`` names (see the module); :class:`StoreOptionError` with the reason if it cannot be."""
    if not spec:
        try:
            return Store(home / "flexq.db", follow=follow, reserve=RESERVE)
        except (OSError, sqlite3.Error) as exc:
            raise StoreOptionError(f"cannot open the store {home / 'flexq.db'}: {exc}") from None
    if is_postgres(spec):
        return _postgres(spec)
    if "://" in spec and not spec.startswith("sqlite://"):
        raise StoreOptionError(f"--store {shown(spec)}: expected postgresql://USER@HOST:PORT/DB or "
                               "sqlite:///PATH")
    path = spec.removeprefix("sqlite://")
    if not path:
        raise StoreOptionError(f"--store {spec}: no file named (sqlite:///PATH)")
    try:
        return Store(Path(path).expanduser(), follow=follow, reserve=RESERVE)
    except (OSError, sqlite3.Error) as exc:
        raise StoreOptionError(f"--store {spec}: cannot open the SQLite file: {exc}") from None


def open_lease(spec: str | None, home: Path, identity: str, *, duration: float, shared: bool) -> LeaseLike | None:
    """The controllers' lease where the store ``spec`` names is shared (PostgreSQL, or a SQLite file with
    ``shared``: ``--shared``); None where one server is alone on it. PostgreSQL's lease loads psycopg only here."""
    if not is_postgres(spec):
        path = sqlite_path(spec, home)
        return SqliteLease(path, identity, duration=duration) if shared and path is not None else None
    from flexq.store.lease import Lease

    assert spec is not None
    return Lease(spec, identity, duration=duration)


def _postgres(spec: str) -> BaseStore:
    try:
        from psycopg.conninfo import conninfo_to_dict

        from flexq.store.postgres import PostgresStore, Unavailable
    except ImportError:
        raise StoreOptionError(f"--store {shown(spec)}: PostgreSQL needs psycopg: pip install 'flexq[postgresql]'"
                               ) from None
    try:
        conninfo_to_dict(spec)
    except Exception as exc:
        raise StoreOptionError(f"--store {shown(spec)}: not a PostgreSQL URL ({str(exc).strip()})") from None
    try:
        return PostgresStore(spec)
    except Unavailable as exc:
        raise StoreOptionError(f"--store {shown(spec)}: cannot use the database: {exc}") from None
