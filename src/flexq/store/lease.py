"""Leader election through the database, as Kubernetes' controllers elect theirs through a Lease.

A row of the ``leases`` table names a holder and when it last renewed. A server acquires it when nobody holds
it, or when the holder let it expire (no renewal for ``duration`` seconds); the holder renews it well within
that time. Every time is the database's own clock, so the servers' clocks need not agree.
"""

from __future__ import annotations

import contextlib
from datetime import datetime

import psycopg

from flexq.store.holder import Holder
from flexq.store.postgres import Connection, Unavailable, connect

__all__ = ["Holder", "Lease"]

_ACQUIRE = """
INSERT INTO leases AS l (name, holder, acquired, renewed, duration, transitions)
VALUES (%(name)s, %(holder)s, clock_timestamp(), clock_timestamp(), %(duration)s, 0)
ON CONFLICT (name) DO UPDATE SET
    holder = EXCLUDED.holder, renewed = EXCLUDED.renewed, duration = EXCLUDED.duration,
    acquired = CASE WHEN l.holder = EXCLUDED.holder THEN l.acquired ELSE EXCLUDED.acquired END,
    transitions = l.transitions + CASE WHEN l.holder = EXCLUDED.holder THEN 0 ELSE 1 END
WHERE l.holder = EXCLUDED.holder OR l.renewed + make_interval(secs => l.duration) < clock_timestamp()
RETURNING holder
"""


class Lease:
    """The lease ``name`` in the database at ``url``, sought by ``identity`` (on a connection of its own, so
    that renewing never waits for the store)."""

    kind = "postgresql"

    def __init__(self, url: str, identity: str, *, name: str = "flexq-controller", duration: float = 15.0) -> None:
        self.url = url
        self.identity = identity
        self.name = name
        self.duration = duration
        self._conn: Connection | None = None

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self.url)
        return self._conn

    def _run(self, sql: str, params: dict[str, object]) -> list[tuple[object, ...]]:
        try:
            return self._connection().execute(sql, params).fetchall()
        except psycopg.Error as exc:
            self.close()
            raise Unavailable(str(exc).strip()) from None

    def acquire(self) -> bool:
        """Acquire or renew the lease; whether it is ours now. :class:`Unavailable` if the database is not."""
        rows = self._run(_ACQUIRE, {"name": self.name, "holder": self.identity, "duration": self.duration})
        return bool(rows)

    def release(self) -> None:
        """Let the lease go at once (if it is ours), so that another server takes over without waiting."""
        with contextlib.suppress(Unavailable):
            self._run("UPDATE leases SET renewed = to_timestamp(0) WHERE name = %(name)s AND holder = %(holder)s",
                      {"name": self.name, "holder": self.identity})

    def read(self) -> Holder | None:
        rows = self._run("SELECT holder, acquired, renewed, duration, transitions, "
                         "renewed + make_interval(secs => duration) < clock_timestamp() FROM leases "
                         "WHERE name = %(name)s", {"name": self.name})
        if not rows:
            return None
        holder, acquired, renewed, duration, transitions, expired = rows[0]
        assert isinstance(acquired, datetime) and isinstance(renewed, datetime)
        return Holder(str(holder), acquired, renewed, float(str(duration)), int(str(transitions)), bool(expired))

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
