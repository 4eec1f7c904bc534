"""What a back end of the store supplies (:mod:`flexq.store.sqlite`, :mod:`flexq.store.postgres`): beginning,
committing and undoing a transaction, and reading and writing rows. :class:`~flexq.store.base.BaseStore` does the
rest on top of these."""

from __future__ import annotations

from flexq.store.changes import ChangeType, LogRow
from flexq.store.refusals import Key, StoreUnavailable

__all__ = ["Backend"]


class Backend:
    """The statements of one database. Its write transactions must exclude one another (SQLite's ``BEGIN
    IMMEDIATE``, a row lock on PostgreSQL), so that resourceVersions are committed in the order they are given
    out, without gaps."""

    def close(self) -> None:
        raise NotImplementedError

    # --- what a back end supplies ------------------------------------------------------------------

    def _begin(self) -> None:
        """Begin a write transaction that excludes every other writer."""
        raise NotImplementedError

    def _end(self) -> None:
        """Commit the transaction."""
        raise NotImplementedError

    def _undo(self) -> None:
        """Roll the transaction back."""
        raise NotImplementedError

    def _savepoint(self, step: str) -> None:
        """``step``: "begin", "undo" (roll back to the savepoint) or "release". At "begin" the batch holds
        finished transactions only: a back end may commit them first (as :meth:`breathe` does)."""
        raise NotImplementedError

    def _in_transaction(self) -> bool:
        """Whether a transaction is open: a database may roll one back on its own (SQLite on a full disk)."""
        return True

    def _refusal(self, exc: BaseException) -> StoreUnavailable | None:
        """``exc`` as :class:`StoreUnavailable` where it is the database refusing a write (full, locked, I/O),
        None where it is anything else."""
        return None

    def _counter(self, name: str) -> int | None:
        raise NotImplementedError

    def _set_counter(self, name: str, value: int) -> None:
        raise NotImplementedError

    def _next_rv(self) -> int:
        raise NotImplementedError

    def _body(self, key: Key) -> str | None:
        raise NotImplementedError

    def _exists(self, key: Key) -> bool:
        raise NotImplementedError

    def _version(self, key: Key) -> int | None:
        """The resourceVersion the object at ``key`` was last written at; None where there is none."""
        raise NotImplementedError

    def _existing(self, keys: list[Key]) -> set[Key]:
        """Which of ``keys`` name a stored object (a back end may ask once for all)."""
        return {key for key in keys if self._exists(key)}

    def _listing(self, group: str, resource: str, namespace: str | None) -> tuple[list[str], int]:
        """Bodies of one resource, ordered by namespace and name (as bytes compare), and the resourceVersion
        they are as of."""
        raise NotImplementedError

    def _found(self, group: str, resource: str, path: str, value: str) -> list[str]:
        raise NotImplementedError

    def _log_after(self, since: int, limit: int) -> list[LogRow]:
        raise NotImplementedError

    def _changed_after(self, group: str, resource: str, namespace: str | None, since: int) -> bool:
        """Whether the log holds a change to an object of one resource (in ``namespace``; None: in any) after
        ``since``, as the open transaction sees it: every writer's commits, and its own writes not committed yet."""
        raise NotImplementedError

    def _put(self, change: ChangeType, key: Key, rv: int, body: str) -> None:
        """Write (or, for DELETED, remove) the object's row and append the change to the log."""
        raise NotImplementedError

    def _put_new(self, rows: list[tuple[Key, int, str]]) -> None:
        """Write new objects (``(key, rv, body)``, none of them stored yet) and append their changes to the log (a
        back end may do it in one statement for all)."""
        for key, rv, body in rows:
            self._put(ChangeType.ADDED, key, rv, body)

    def _drop_log(self, cutoff: int) -> int:
        """Delete the changes up to ``cutoff``; return how many."""
        raise NotImplementedError
