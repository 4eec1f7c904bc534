from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flexq.store import AlreadyExists, BaseStore, ChangeType, Conflict, Gone, Key, NotFound, record_event
from tests.store.conftest import OpenStore
from tests.support import eventually

KEY = Key("kueue.x-k8s.io", "clusterqueues", "", "cq")


def _obj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": spec}


def test_create_sets_server_fields(open_store: OpenStore) -> None:
    store = open_store(now=lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), new_uid=lambda: "uid-1")
    created = store.create(KEY, _obj(a=1))
    assert created["metadata"] == {"name": "cq", "uid": "uid-1", "generation": 1,
                                   "creationTimestamp": "2026-01-02T03:04:05Z", "resourceVersion": "1"}
    assert store.get(KEY) == created
    with pytest.raises(AlreadyExists):
        store.create(KEY, _obj())


def test_update_conflict_generation_and_status(open_store: OpenStore) -> None:
    store = open_store()
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


def test_noop_update_writes_nothing(open_store: OpenStore) -> None:
    store = open_store()
    created = store.create(KEY, _obj(a=1))
    again = store.update(KEY, created)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert store.current_rv() == 1


def test_an_object_read_to_change_comes_twice_from_one_read(open_store: OpenStore) -> None:
    store = open_store()
    created = store.create(KEY, _obj())
    mine, stored = store.get_to_change(KEY)
    assert mine == stored == created and mine is not stored
    mine["spec"] = {"changed": True}
    mine["metadata"]["labels"] = {"x": "y"}
    assert stored == created, "the object as stored shares nothing with the copy to change"
    written = store.update(KEY, mine, current=stored)
    assert written["spec"] == {"changed": True} and written["metadata"]["generation"] == 2
    with pytest.raises(NotFound):
        store.get_to_change(Key("", "configmaps", "default", "none"))


def test_delete_and_not_found(open_store: OpenStore) -> None:
    store = open_store()
    store.create(KEY, _obj())
    with pytest.raises(Conflict):
        store.delete(KEY, resource_version="999")
    gone = store.delete(KEY)
    assert gone["metadata"]["deletionTimestamp"]
    with pytest.raises(NotFound):
        store.get(KEY)
    with pytest.raises(NotFound):
        store.delete(KEY)


def test_transaction_is_all_or_nothing(open_store: OpenStore) -> None:
    store = open_store()
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


def test_change_log_resumes_after_reopen(open_store: OpenStore, backend: str, tmp_path: Path) -> None:
    path = tmp_path / "state" / "flexq.db"
    store = open_store(path)
    store.create(KEY, _obj(a=1))
    store.update(KEY, _obj(a=2))
    first = store.changes(0)
    assert [(c.rv, c.type) for c in first] == [(1, ChangeType.ADDED), (2, ChangeType.MODIFIED)]
    store.close()
    reopened = open_store(path)
    reopened.delete(KEY)
    resumed = reopened.changes(first[-1].rv)
    assert [(c.rv, c.type, c.key) for c in resumed] == [(3, ChangeType.DELETED, KEY)]
    if backend == "sqlite":
        assert (path.parent / "flexq.db-wal").exists(), "the store runs in WAL mode"
    reopened.close()


def test_compaction_makes_old_resumes_gone(open_store: OpenStore) -> None:
    store = open_store()
    for i in range(5):
        store.create(Key("", "configmaps", "default", f"c{i}"), {"metadata": {}})
    assert store.compact(keep=2) == 3
    assert [c.rv for c in store.changes(3)] == [4, 5]
    with pytest.raises(Gone):
        store.changes(1)


def test_list_by_namespace_ordered(open_store: OpenStore) -> None:
    store = open_store()
    for ns, name in [("b", "x"), ("a", "y"), ("a", "x")]:
        store.create(Key("", "configmaps", ns, name), {"metadata": {}})
    items, rv = store.list_objects("", "configmaps")
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in items] == [("a", "x"), ("a", "y"), ("b", "x")]
    assert rv == 3
    assert [o["metadata"]["name"] for o in store.list_objects("", "configmaps", "a")[0]] == ["x", "y"]


def test_events_are_counted(open_store: OpenStore) -> None:
    store = open_store()
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


def _flavor(i: int) -> tuple[Key, dict[str, Any]]:
    return (Key("kueue.x-k8s.io", "resourceflavors", "", f"rf{i}"),
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f"rf{i}"}})


def test_change_log_keeps_a_window_as_etcd_compacts(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store(tmp_path / "flexq.db", history=50)
    for i in range(1000):  # compaction runs once a tenth of the history (at least 1,000 changes) was written
        store.create(*_flavor(i))
    with pytest.raises(Gone) as gone:
        store.changes(949)
    assert gone.value.oldest == 951
    kept = store.changes(950)
    assert [c.rv for c in kept] == list(range(951, 1001))
    assert kept[-1].obj["metadata"]["name"] == "rf999"
    store.close()
    reopened = open_store(tmp_path / "flexq.db", history=50)  # read from disk, not from the window in memory
    assert [(c.rv, c.obj) for c in reopened.changes(950)] == [(c.rv, c.obj) for c in kept]
    with pytest.raises(Gone):
        reopened.changes(0)
    reopened.close()


def test_changes_of_one_resource_move_past_the_others(open_store: OpenStore) -> None:
    store = open_store()
    store.create(KEY, _obj())
    for i in range(3):
        store.create(Key("", "configmaps", "default", f"c{i}"), {"metadata": {}})
    store.create(*_flavor(1))
    flavors = frozenset({("kueue.x-k8s.io", "resourceflavors")})
    found, reached = store.changes_of(0, flavors)
    assert [c.key.name for c in found] == ["rf1"] and reached == 5
    found, reached = store.changes_of(0, frozenset({("", "configmaps")}), limit=2)
    assert [c.key.name for c in found] == ["c0", "c1"] and reached == 3
    assert store.changes_of(5, flavors) == ([], 5)


def test_a_reader_changing_a_change_reaches_nobody_else(open_store: OpenStore) -> None:
    store = open_store()
    store.create(KEY, _obj(a=1))
    first = store.changes(0)[0]
    first.obj["spec"]["a"] = 2
    assert store.changes(0)[0].obj["spec"] == {"a": 1}
    assert store.get(KEY)["spec"] == {"a": 1}


def test_batch_commits_once_and_undoes_a_failed_transaction_alone(open_store: OpenStore) -> None:
    store = open_store()
    seen: list[list[int]] = []
    store.subscribe(lambda changes: seen.append([c.rv for c in changes]))
    with pytest.raises(RuntimeError), store.batch():
        store.create(*_flavor(1))
        with pytest.raises(AlreadyExists):
            store.create(*_flavor(1))
        try:
            with store.transaction():
                store.create(*_flavor(2))
                raise ValueError("undone")
        except ValueError:
            pass
        store.create(*_flavor(3))
        assert seen == [], "nothing is committed before the batch ends"
        raise RuntimeError("the batch ends with an exception: what finished is still committed")
    assert [c.key.name for c in store.changes(0)] == ["rf1", "rf3"]
    assert len(seen) == 1 and len(seen[0]) == 2
    with pytest.raises(NotFound):
        store.get(_flavor(2)[0])


def _configmap(name: str) -> tuple[Key, dict[str, Any]]:
    return Key("", "configmaps", "default", name), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}


def _note_writer(store: BaseStore, notes: list[str]) -> Callable[[], None]:
    """What a batch holds back in these tests: a note (a ConfigMap ``NAME-note``) per object it made, written by
    ``held`` in a transaction of its own, then forgotten."""
    def held() -> None:
        with store.transaction():
            for name in notes:
                store.create(*_configmap(f"{name}-note"))
        notes.clear()

    return held


@pytest.mark.parametrize("ending", ["returns", "raises"])
def test_what_a_batch_holds_back_is_committed_with_the_transactions_before_it(open_store: OpenStore,
                                                                               ending: str) -> None:
    """Each commit of a batch (a breathe, the back end's own after many savepoints on PostgreSQL, the end, an
    exception leaving it) has ``held`` write what was held back so far first, and nothing held for a transaction
    that was undone."""
    store = open_store()
    commits: list[list[str]] = []
    store.subscribe(lambda changes: commits.append([c.key.name for c in changes]))
    notes: list[str] = []
    held = _note_writer(store, notes)

    with pytest.raises(RuntimeError) if ending == "raises" else contextlib.nullcontext(), store.batch(held=held):
        for n in range(120):
            mark = len(notes)
            try:
                with store.transaction():
                    store.create(*_configmap(f"cm{n}"))
                    notes.append(f"cm{n}")
                    if n % 7 == 3:
                        raise ValueError("undone, with what it held back")
            except ValueError:
                del notes[mark:]
            if n == 30:
                store.breathe(every=0)
        if ending == "raises":
            raise RuntimeError("the batch ends with an exception")
    written = [name for names in commits for name in names]
    assert len(written) == 2 * len([n for n in range(120) if n % 7 != 3]) and len(commits) >= 2
    for names in commits:
        made = {name for name in names if not name.endswith("-note")}
        assert {name.removesuffix("-note") for name in names if name.endswith("-note")} == made, names


def test_what_a_batch_holds_back_outlives_another_batch_let_in_by_a_breathe(open_store: OpenStore,
                                                                             backend: str) -> None:
    if backend == "postgresql":
        pytest.skip("on PostgreSQL a batch lets the store go while it waits for the database (Gate.aside): the other "
                    "batch need not wait for the breathe")
    store = open_store()
    notes: list[str] = []
    held = _note_writer(store, notes)

    with store.batch(held=held):
        store.create(*_configmap("first"))
        notes.append("first")

        def other_batch() -> None:
            with store.batch():
                store.create(*_configmap("other"))

        other = threading.Thread(target=other_batch)
        other.start()

        def waits() -> None:
            assert store._lock.waiting, "the other batch does not wait for the store yet"

        eventually(waits, every=0.01)
        store.breathe(every=0)  # the other batch comes in, and ends, while this one hands over
        other.join(timeout=10)
        store.create(*_configmap("second"))
        notes.append("second")
        store.breathe(every=0)  # still this thread's batch: the breathe commits, writing what is held back
        assert notes == [], "a breathe after another batch came in still breathes"
    names = {c.key.name for c in store.changes(0)}
    assert {"first", "first-note", "other", "second", "second-note"} <= names, names


def test_written_objects_share_nothing_with_the_input(open_store: OpenStore) -> None:
    store = open_store()
    given = _obj(a={"b": 1})
    created = store.create(KEY, given)
    created["spec"]["a"]["b"] = 2
    assert given["spec"]["a"] == {"b": 1} and "uid" not in given["metadata"]
    status = {"x": [1]}
    updated = store.update(KEY, {"metadata": {}, "status": status}, subresource="status")
    updated["status"]["x"].append(2)
    assert status == {"x": [1]} and store.get(KEY)["status"] == {"x": [1]}


def test_find_by_a_field(open_store: OpenStore) -> None:
    store = open_store()
    for ns, name, cq in [("b", "x", "cq"), ("a", "y", "cq"), ("a", "z", "other")]:
        store.create(Key("kueue.x-k8s.io", "localqueues", ns, name), {"metadata": {}, "spec": {"clusterQueue": cq}})
    found = store.find("kueue.x-k8s.io", "localqueues", "$.spec.clusterQueue", "cq")
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in found] == [("a", "y"), ("b", "x")]
    assert store.find("kueue.x-k8s.io", "localqueues", "$.spec.clusterQueue", "none") == []


def test_committed_changes_are_read_while_another_thread_holds_the_store(open_store: OpenStore) -> None:
    """A watch reads the newest changes without waiting for a writer's batch (a controller's step), and sees only
    what is committed."""
    store = open_store()
    before = store.current_rv()
    store.create(Key("", "configmaps", "default", "a"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.batch():
            store.create(Key("", "configmaps", "default", "b"), {"apiVersion": "v1", "kind": "ConfigMap",
                                                                  "metadata": {}})
            held.set()
            assert release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        read: list[list[str]] = []
        reader = threading.Thread(target=lambda: read.append([c.key.name for c in store.changes(before)]))
        reader.start()
        reader.join(timeout=5)
        assert read == [["a"]], "the read waited for the batch, or saw what it had not committed"
    finally:
        release.set()
        holder.join(timeout=10)
    assert [c.key.name for c in store.changes(before)] == ["a", "b"]
