from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flexq.store import AlreadyExists, ChangeType, Conflict, Gone, Key, NotFound, Store, record_event

KEY = Key("kueue.x-k8s.io", "clusterqueues", "", "cq")


def _obj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": spec}


def test_create_sets_server_fields() -> None:
    store = Store(now=lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), new_uid=lambda: "uid-1")
    created = store.create(KEY, _obj(a=1))
    assert created["metadata"] == {"name": "cq", "uid": "uid-1", "generation": 1,
                                   "creationTimestamp": "2026-01-02T03:04:05Z", "resourceVersion": "1"}
    assert store.get(KEY) == created
    with pytest.raises(AlreadyExists):
        store.create(KEY, _obj())


def test_update_conflict_generation_and_status() -> None:
    store = Store()
    created = store.create(KEY, _obj(a=1))
    stale = dict(created, spec={"a": 2})
    updated = store.update(KEY, stale)
    assert updated["metadata"]["generation"] == 2
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(Conflict):
        store.update(KEY, dict(created, spec={"a": 3}))  # created's resourceVersion is stale now
    status = store.update(KEY, dict(updated, status={"x": 1}), subresource="status")
    assert status["status"] == {"x": 1} and status["metadata"]["generation"] == 2
    main = store.update(KEY, {**_obj(a=2), "status": {"ignored": True}})
    assert main["status"] == {"x": 1}, "a main-resource update keeps the stored status"
    assert main["metadata"]["generation"] == 2, "metadata-only changes do not bump generation"


def test_noop_update_writes_nothing() -> None:
    store = Store()
    created = store.create(KEY, _obj(a=1))
    again = store.update(KEY, created)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert store.current_rv() == 1


def test_delete_and_not_found() -> None:
    store = Store()
    store.create(KEY, _obj())
    with pytest.raises(Conflict):
        store.delete(KEY, resource_version="999")
    gone = store.delete(KEY)
    assert gone["metadata"]["deletionTimestamp"]
    with pytest.raises(NotFound):
        store.get(KEY)
    with pytest.raises(NotFound):
        store.delete(KEY)


def test_transaction_is_all_or_nothing() -> None:
    store = Store()
    seen: list[int] = []
    store.subscribe(lambda changes: seen.extend(c.rv for c in changes))
    with pytest.raises(AlreadyExists), store.transaction():
        store.create(Key("", "configmaps", "default", "a"), {"metadata": {}})
        store.create(KEY, _obj())
        store.create(KEY, _obj())
    assert store.list_objects("", "configmaps")[0] == []
    assert store.current_rv() == 0
    assert seen == [], "nothing is announced for a rolled-back transaction"
    with store.transaction():
        store.create(Key("", "configmaps", "default", "a"), {"metadata": {}})
        store.create(KEY, _obj())
    assert seen == [1, 2]


def test_change_log_resumes_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state" / "flexq.db"
    store = Store(path)
    store.create(KEY, _obj(a=1))
    store.update(KEY, _obj(a=2))
    first = store.changes(0)
    assert [(c.rv, c.type) for c in first] == [(1, ChangeType.ADDED), (2, ChangeType.MODIFIED)]
    store.close()
    reopened = Store(path)
    reopened.delete(KEY)
    resumed = reopened.changes(first[-1].rv)
    assert [(c.rv, c.type, c.key) for c in resumed] == [(3, ChangeType.DELETED, KEY)]
    assert (path.parent / "flexq.db-wal").exists(), "the store runs in WAL mode"
    reopened.close()


def test_compaction_makes_old_resumes_gone() -> None:
    store = Store()
    for i in range(5):
        store.create(Key("", "configmaps", "default", f"c{i}"), {"metadata": {}})
    assert store.compact(keep=2) == 3
    assert [c.rv for c in store.changes(3)] == [4, 5]
    with pytest.raises(Gone):
        store.changes(1)


def test_list_by_namespace_ordered() -> None:
    store = Store()
    for ns, name in [("b", "x"), ("a", "y"), ("a", "x")]:
        store.create(Key("", "configmaps", ns, name), {"metadata": {}})
    items, rv = store.list_objects("", "configmaps")
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in items] == [("a", "x"), ("a", "y"), ("b", "x")]
    assert rv == 3
    assert [o["metadata"]["name"] for o in store.list_objects("", "configmaps", "a")[0]] == ["x", "y"]


def test_events_are_counted() -> None:
    store = Store()
    cq = store.create(KEY, _obj())
    t1, t2 = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    first = record_event(store, cq, "Created", "made", now=t1)
    again = record_event(store, cq, "Created", "made", now=t2)
    other = record_event(store, cq, "Inactive", "missing flavor", type="Warning", now=t2)
    assert first["metadata"]["name"] == again["metadata"]["name"] != other["metadata"]["name"]
    assert again["count"] == 2
    assert again["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert again["lastTimestamp"] == "2026-01-01T00:05:00Z"
    assert again["involvedObject"]["uid"] == cq["metadata"]["uid"]
    assert len(store.list_objects("", "events", "default")[0]) == 2


def test_consumer_cursor_survives_restart(tmp_path: Path) -> None:
    path = tmp_path / "flexq.db"
    store = Store(path)
    for i in range(3):
        store.create(Key("", "configmaps", "default", f"c{i}"), {"metadata": {}})
    assert store.cursor("scheduler") == 0
    seen = store.changes(store.cursor("scheduler"), limit=2)
    store.save_cursor("scheduler", seen[-1].rv)
    store.close()
    reopened = Store(path)
    assert [c.key.name for c in reopened.changes(reopened.cursor("scheduler"))] == ["c2"]
    reopened.close()
