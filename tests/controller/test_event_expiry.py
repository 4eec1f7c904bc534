"""Events expire after the TTL since they were last seen, as with the API server's --event-ttl."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flexq.controller.event_expiry import EventExpiry
from flexq.store import Key, Store
from flexq.store.recorder import record_event

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _involved(name: str) -> dict[str, object]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "team", "uid": name}}


def test_events_older_than_the_ttl_go_and_those_seen_since_stay(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    try:
        ages = {"old": timedelta(hours=2), "recent": timedelta(minutes=10), "boundary": timedelta(minutes=59)}
        for name, age in ages.items():
            record_event(store, _involved(name), "Started", f"{name} started", now=NOW - age)
        # Seen first two hours ago and again five minutes ago: it lives on.
        record_event(store, _involved("again"), "Pending", "waits", now=NOW - timedelta(hours=2))
        record_event(store, _involved("again"), "Pending", "waits", now=NOW - timedelta(minutes=5))
        expiry = EventExpiry(store, 3600, now=NOW.timestamp)
        assert expiry.sweep() == 1 and expiry.expired == 1
        left = {e["involvedObject"]["name"]: e["count"] for e in store.list_objects("", "events")[0]}
        assert left == {"recent": 1, "boundary": 1, "again": 2}
        assert expiry.sweep() == 0
        later = EventExpiry(store, 3600, now=(NOW + timedelta(minutes=2)).timestamp)
        assert later.sweep() == 1  # "boundary" is past its hour now
        assert {e["involvedObject"]["name"] for e in store.list_objects("", "events")[0]} == {"recent", "again"}
    finally:
        store.close()


def test_a_ttl_of_zero_keeps_events(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    try:
        expiry = EventExpiry(store, 0)
        expiry.start()
        assert expiry._thread is None
        expiry.stop()
        assert EventExpiry(store, 30).every == 3.0 and EventExpiry(store, 86400).every == 60.0
    finally:
        store.close()


def test_after_the_first_sweep_the_expiry_follows_the_changes_instead_of_listing(tmp_path: Path,
                                                                                  monkeypatch: Any) -> None:
    store = Store(tmp_path / "flexq.db")
    try:
        record_event(store, _involved("before"), "Started", "before started", now=NOW - timedelta(hours=3))
        expiry = EventExpiry(store, 3600, now=NOW.timestamp)
        assert expiry.sweep() == 1
        monkeypatch.setattr(store, "list_objects", _no_listing)
        record_event(store, _involved("stale"), "Started", "stale started", now=NOW - timedelta(hours=2))
        record_event(store, _involved("fresh"), "Started", "fresh started", now=NOW - timedelta(minutes=1))
        record_event(store, _involved("again"), "Pending", "waits", now=NOW - timedelta(hours=2))
        record_event(store, _involved("again"), "Pending", "waits", now=NOW - timedelta(minutes=1))
        assert expiry.sweep() == 1 and expiry.expired == 2
        assert sorted(k.name.split(".")[0] for k in _event_keys(store)) == ["again", "fresh"]
        expiry.now = (NOW + timedelta(hours=1)).timestamp
        assert expiry.sweep() == 2 and _event_keys(store) == []
    finally:
        store.close()


def _no_listing(*_args: object) -> None:
    raise AssertionError("the Events were listed again")


def _event_keys(store: Store) -> list[Key]:
    rows = store._db.execute("SELECT namespace, name FROM objects WHERE resource='events'").fetchall()
    return [Key("", "events", ns, name) for ns, name in rows]


def test_a_started_expiry_reads_the_events_at_once_and_never_lists_them_again(tmp_path: Path,
                                                                              monkeypatch: Any) -> None:
    store = Store(tmp_path / "flexq.db")
    expiry = EventExpiry(store, 3600, now=NOW.timestamp)
    try:
        record_event(store, _involved("before"), "Started", "before started", now=NOW - timedelta(hours=3))
        expiry.every = 3600.0  # no sweep of its own during the test
        expiry.start()
        deadline = time.monotonic() + 10
        while not expiry._seeded and time.monotonic() < deadline:
            time.sleep(0.01)
        assert expiry._seeded
        monkeypatch.setattr(store, "list_objects", _no_listing)
        record_event(store, _involved("stale"), "Started", "stale started", now=NOW - timedelta(hours=2))
        assert expiry.sweep() == 2 and _event_keys(store) == []
    finally:
        expiry.stop()
        store.close()
