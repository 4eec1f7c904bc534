"""The resourceVersion counter: one per write, no gaps, and on SQLite written once a transaction, however many writes
it holds."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from flexq.store import AlreadyExists, Key, Store, rfc3339
from tests.store.conftest import OpenStore


def _flavor(i: int) -> tuple[Key, dict[str, object]]:
    return (Key("kueue.x-k8s.io", "resourceflavors", "", f"rf{i}"),
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f"rf{i}"}})


def test_a_batch_gives_out_versions_without_gaps_past_undone_and_refused_writes(open_store: OpenStore,
                                                                               tmp_path: Path) -> None:
    store = open_store(tmp_path / "flexq.db")
    before = store.current_rv()
    with store.batch():
        store.create(*_flavor(1))
        with pytest.raises(AlreadyExists):
            store.create(*_flavor(1))
        with pytest.raises(ValueError, match="undone"), store.transaction():
            store.create(*_flavor(2))
            store.create(*_flavor(3))
            raise ValueError("undone")
        assert store.current_rv() == before + 1, "the undone transaction's versions are given out again"
        store.create(*_flavor(4))
        store.create(*_flavor(5))
    rvs = [c.rv for c in store.changes(before)]
    assert rvs == [before + 1, before + 2, before + 3]
    assert store.current_rv() == before + 3
    store.close()
    reopened = open_store(tmp_path / "flexq.db")
    assert reopened.current_rv() == before + 3, "the counter as committed, read back"
    created = reopened.create(*_flavor(6))
    assert created["metadata"]["resourceVersion"] == str(before + 4)


def test_sqlite_writes_the_counter_once_a_transaction(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    with store.batch():
        for i in range(50):
            store.create(*_flavor(i))
    store._db.set_trace_callback(None)
    counted = [s for s in statements if s.startswith("UPDATE counters")]
    assert len(counted) == 2, counted  # the first write's count, and the value at the commit
    store.close()
    db = sqlite3.connect(tmp_path / "flexq.db")
    try:
        assert db.execute("SELECT value FROM counters WHERE name='rv'").fetchone()[0] == 50
        assert db.execute("SELECT max(rv), count(*) FROM changes").fetchone() == (50, 50)
    finally:
        db.close()


@pytest.mark.parametrize("moment", [
    datetime(2026, 12, 2, 6, 30, 0, 999_999, tzinfo=UTC),
    datetime(2026, 12, 2, 6, 30, 1, tzinfo=UTC),
    datetime(1960, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC),
    datetime(2026, 1, 1, 5, 0, tzinfo=timezone(timedelta(hours=3))),
])
def test_a_stamp_is_the_moment_to_the_second_in_utc(moment: datetime) -> None:
    assert rfc3339(moment) == moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
