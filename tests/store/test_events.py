"""Events recorded together (a controller step's): new ones created in one go, repeats counted on their Event."""

from __future__ import annotations

from datetime import UTC, datetime

from flexq.store import Key, record_event
from flexq.store.recorder import event_note, record_events
from tests.store.conftest import OpenStore

JOB = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1", "resourceVersion": "7"}}


def _flavor(name: str, label: str) -> tuple[Key, dict[str, object]]:
    return (Key("kueue.x-k8s.io", "resourceflavors", "", name),
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
             "metadata": {"name": name, "labels": {"made": label}}})


def test_create_many_stores_the_new_leaves_the_stored_and_keeps_the_first_of_a_key(open_store: OpenStore) -> None:
    store = open_store()
    store.create(*_flavor("rf1", "before"))
    before = store.current_rv()
    existed = store.create_many([_flavor("rf1", "again"), _flavor("rf2", "first"), _flavor("rf2", "second"),
                                 _flavor("rf3", "first")])
    assert existed == {_flavor("rf1", "")[0]}
    assert store.get(_flavor("rf1", "")[0])["metadata"]["labels"] == {"made": "before"}
    rf2 = store.get(_flavor("rf2", "")[0])
    assert rf2["metadata"]["labels"] == {"made": "first"}
    assert rf2["metadata"]["generation"] == 1 and rf2["metadata"]["uid"]
    assert [(c.rv, c.key.name, c.type.value) for c in store.changes(before)] == [
        (before + 1, "rf2", "ADDED"), (before + 2, "rf3", "ADDED")]
    assert store.get(_flavor("rf3", "")[0])["metadata"]["resourceVersion"] == str(before + 2)


def test_events_recorded_together_are_one_commit_and_count_their_repeats(open_store: OpenStore) -> None:
    store = open_store()
    stored = record_event(store, JOB, "Started", "Admitted by clusterQueue cq", echo=True,
                          now=datetime(2026, 12, 2, 6, 0, tzinfo=UTC))
    commits: list[list[str]] = []
    store.subscribe(lambda changes: commits.append([f"{c.type.value} {c.key.name}" for c in changes]))
    created = event_note(JOB, "CreatedWorkload", "Created Workload: team-a/w", "2026-12-02T06:00:01Z")
    notes = [
        created,
        event_note(JOB, "Started", "Admitted by clusterQueue cq", "2026-12-02T06:00:02Z"),
        event_note(JOB, "CreatedWorkload", "Created Workload: team-a/w", "2026-12-02T06:00:03Z"),
        event_note(JOB, "Stopped", "Evicted", "2026-12-02T06:00:04Z", type="Warning"),
    ]
    record_events(store, notes)
    assert len(commits) == 1, commits
    assert sorted(commits[0]) == sorted([f"ADDED {created[0].name}", f"ADDED {notes[3][0].name}",
                                         f"MODIFIED {stored['metadata']['name']}"])
    again = store.get(created[0])
    assert (again["count"], again["firstTimestamp"], again["lastTimestamp"]) == (
        2, "2026-12-02T06:00:01Z", "2026-12-02T06:00:03Z")
    assert again["involvedObject"] == {"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                       "namespace": "team-a", "uid": "u-1", "resourceVersion": "7"}
    started = store.get(notes[1][0])
    assert (started["count"], started["lastTimestamp"]) == (2, "2026-12-02T06:00:02Z")
    stopped = store.get(notes[3][0])
    assert (stopped["type"], stopped["count"], stopped["reason"]) == ("Warning", 1, "Stopped")
    record_events(store, [])
    assert len(commits) == 1, "nothing to record writes nothing"


def test_a_repeat_recorded_at_the_stores_time_moves_the_events_last_time(open_store: OpenStore) -> None:
    moments = iter([datetime(2026, 12, 2, 6, 0, s, tzinfo=UTC) for s in range(0, 60, 5)])
    store = open_store(now=lambda: next(moments))
    record_event(store, JOB, "Pending", "no quota")
    again = record_event(store, JOB, "Pending", "no quota", echo=True)
    assert again["count"] == 2
    assert again["firstTimestamp"] < again["lastTimestamp"], "seen again later"
