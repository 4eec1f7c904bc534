"""An API worker's store: transactions prepared on a replica of the owner's file and committed by the owner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flexq.api.kinds import resolve
from flexq.objects import ObjectService
from flexq.store import ChangeType, ForeignTx, Key, ReplicaStore, Stale, Store, commit_foreign
from flexq.store.codec import dumps
from flexq.store.foreign import PROVISIONAL, Put

CONFIG_MAP = resolve("configmap")
CLUSTER_QUEUE = resolve("clusterqueue")


def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


class Pair:
    """The owner's store and a worker's replica of the same file; ``before_commit`` runs in the owner just before
    each transaction the replica sends is committed (a write that races it)."""

    def __init__(self, path: Path) -> None:
        self.owner = Store(path)
        self.before_commit: Callable[[], None] | None = None
        self.sent: list[ForeignTx] = []
        self.replica = ReplicaStore(path, self._commit, follow=0.001)

    def _commit(self, tx: ForeignTx) -> list[int]:
        self.sent.append(ForeignTx.from_wire(tx.to_wire()))  # through the wire format, as a worker sends it
        if self.before_commit is not None:
            hook, self.before_commit = self.before_commit, None
            hook()
        return commit_foreign(self.owner, self.sent[-1])

    def close(self) -> None:
        self.replica.close()
        self.owner.close()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    made = Pair(tmp_path / "flexq.db")
    try:
        yield made
    finally:
        made.close()


def test_a_create_is_committed_by_the_owner_with_its_real_version(pair: Pair) -> None:
    service = ObjectService(pair.replica)
    created = service.create(CONFIG_MAP, "default", config_map("a", {"x": "1"}))
    stored = pair.owner.get(Key("", "configmaps", "default", "a"))
    assert created["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert int(created["metadata"]["resourceVersion"]) < PROVISIONAL
    assert created["metadata"]["uid"] == stored["metadata"]["uid"]
    assert stored["data"] == {"x": "1"}
    assert [c.type for c in pair.owner.changes(0) if c.key.name == "a"] == [ChangeType.ADDED]


def test_a_write_read_what_changed_since_is_stale_and_nothing_is_written(pair: Pair) -> None:
    ObjectService(pair.owner).create(CONFIG_MAP, "default", config_map("a", {"x": "1"}))
    key = Key("", "configmaps", "default", "a")
    before = pair.owner.current_rv()
    with pytest.raises(Stale), pair.replica.transaction():
        obj = pair.replica.get(key)
        obj["data"] = {"x": "2"}
        pair.before_commit = lambda: pair.owner.update(key, {**pair.owner.get(key), "data": {"x": "3"}})
        pair.replica.update(key, obj)
    assert pair.owner.get(key)["data"] == {"x": "3"}
    assert pair.owner.current_rv() == before + 1  # the racing write alone


def test_a_create_of_a_name_taken_meanwhile_is_stale(pair: Pair) -> None:
    key = Key("", "configmaps", "default", "a")
    with pytest.raises(Stale), pair.replica.transaction():
        pair.before_commit = lambda: pair.owner.create(key, config_map("a", {"by": "owner"}))
        pair.replica.create(key, config_map("a", {"by": "worker"}))
    assert pair.owner.get(key)["data"] == {"by": "owner"}


def test_a_patch_raced_by_another_write_is_run_again_on_the_newer_object(pair: Pair) -> None:
    owner = ObjectService(pair.owner)
    owner.create(CONFIG_MAP, "default", config_map("a", {"x": "1"}))
    key = Key("", "configmaps", "default", "a")
    pair.before_commit = lambda: owner.patch(CONFIG_MAP, "default", "a", "application/merge-patch+json",
                                             {"data": {"y": "2"}})
    patched = ObjectService(pair.replica).patch(CONFIG_MAP, "default", "a", "application/merge-patch+json",
                                                {"data": {"z": "3"}})
    assert patched["data"] == {"x": "1", "y": "2", "z": "3"}
    assert pair.owner.get(key)["data"] == {"x": "1", "y": "2", "z": "3"}
    assert len(pair.sent) == 2  # refused once, then committed


def test_a_patch_with_the_callers_stale_version_is_a_conflict_not_a_retry(pair: Pair) -> None:
    from flexq.store import Conflict

    owner = ObjectService(pair.owner)
    first = owner.create(CONFIG_MAP, "default", config_map("a", {"x": "1"}))
    owner.patch(CONFIG_MAP, "default", "a", "application/merge-patch+json", {"data": {"x": "2"}})
    with pytest.raises(Conflict):
        ObjectService(pair.replica).patch(CONFIG_MAP, "default", "a", "application/merge-patch+json",
                                          {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]},
                                           "data": {"x": "3"}})
    assert pair.sent == []


def test_a_transaction_reads_its_own_writes_in_gets_and_listings(pair: Pair) -> None:
    ObjectService(pair.owner).create(CONFIG_MAP, "default", config_map("b", {}))
    with pair.replica.transaction():
        pair.replica.create(Key("", "configmaps", "default", "c"), config_map("c", {}))
        pair.replica.create(Key("", "configmaps", "default", "a"), config_map("a", {}))
        pair.replica.delete(Key("", "configmaps", "default", "b"))
        names = [o["metadata"]["name"] for o in pair.replica.list_objects("", "configmaps", "default")[0]]
        assert names == ["a", "c"]
        assert pair.replica.get(Key("", "configmaps", "default", "c"))["metadata"]["name"] == "c"
    assert [o["metadata"]["name"] for o in pair.owner.list_objects("", "configmaps", "default")[0]] == ["a", "c"]


def test_a_listing_changed_before_the_commit_makes_it_stale(pair: Pair) -> None:
    with pytest.raises(Stale), pair.replica.transaction():
        pair.replica.list_objects("", "configmaps", "default")
        pair.before_commit = lambda: pair.owner.create(Key("", "configmaps", "default", "x"), config_map("x", {}))
        pair.replica.create(Key("", "configmaps", "default", "y"), config_map("y", {}))
    # A change to another namespace's objects leaves the listing as it was read.
    with pair.replica.transaction():
        pair.replica.list_objects("", "configmaps", "default")
        pair.before_commit = lambda: pair.owner.create(Key("", "configmaps", "other", "x"), config_map("x", {}))
        pair.replica.create(Key("", "configmaps", "default", "y"), config_map("y", {}))
    assert pair.owner.exists(Key("", "configmaps", "default", "y"))


def test_a_listing_changed_by_another_server_on_the_file_makes_it_stale(pair: Pair, tmp_path: Path) -> None:
    """Servers ``--shared`` on one file: the owner has not yet heard of the other server's commit when its worker's
    transaction comes; it reads it from the file before it answers."""
    other = Store(tmp_path / "flexq.db")
    pair.owner.create(Key("", "configmaps", "default", "a"), config_map("a", {}))  # the owner's window serves from here
    try:
        with pytest.raises(Stale), pair.replica.transaction():
            pair.replica.list_objects("", "configmaps", "default")
            pair.before_commit = lambda: other.create(Key("", "configmaps", "default", "x"), config_map("x", {}))
            pair.replica.create(Key("", "configmaps", "default", "y"), config_map("y", {}))
        assert not pair.owner.exists(Key("", "configmaps", "default", "y"))
    finally:
        other.close()


def test_a_listing_changed_by_a_transaction_committed_with_it_makes_it_stale(pair: Pair) -> None:
    """Two workers' transactions in one group commit of the owner: the second listed what the first changes."""
    pair.owner.create(Key("", "configmaps", "default", "a"), config_map("a", {}))  # the owner's window serves from here
    listed = pair.owner.current_rv()

    def put(name: str) -> Put:
        body = {**config_map(name, {}), "metadata": {"name": name, "namespace": "default",
                                                     "resourceVersion": str(PROVISIONAL)}}
        return Put(ChangeType.ADDED, Key("", "configmaps", "default", name), PROVISIONAL, dumps(body))

    with pair.owner.batch():
        commit_foreign(pair.owner, ForeignTx(puts=[put("x")]))
        with pytest.raises(Stale):
            commit_foreign(pair.owner, ForeignTx(listings=[("", "configmaps", "default", listed)], puts=[put("y")]))
        # One that listed another namespace, or another resource, is committed.
        commit_foreign(pair.owner, ForeignTx(listings=[("", "configmaps", "other", listed),
                                                       ("", "secrets", None, listed)], puts=[put("z")]))
    assert [pair.owner.exists(Key("", "configmaps", "default", n)) for n in "xyz"] == [True, False, True]


def test_a_queue_created_with_its_status_in_one_transaction_answers_with_the_last_version(pair: Pair) -> None:
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
             "spec": {"namespaceSelector": {}, "resourceGroups": []}}
    created = ObjectService(pair.replica).create(CLUSTER_QUEUE, None, queue)
    stored = pair.owner.get(Key(CLUSTER_QUEUE.group, "clusterqueues", "", "q"))
    assert created["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert created["status"] == stored["status"]
    # The queue, its Active condition, the Event saying so: one transaction.
    assert [p.key.resource for p in pair.sent[-1].puts] == ["clusterqueues", "clusterqueues", "events"]


def test_the_replica_follows_the_owners_commits_for_watches(pair: Pair) -> None:
    seen: list[int] = []
    pair.replica.subscribe(lambda changes: seen.extend(c.rv for c in changes))
    stored = pair.owner.create(Key("", "configmaps", "default", "a"), config_map("a", {}))
    rv = int(stored["metadata"]["resourceVersion"])
    pair.replica.catch_up()
    assert rv in seen
    assert [c.rv for c in pair.replica.changes(rv - 1)] == [rv]


def test_a_deleted_object_is_answered_with_its_real_version(pair: Pair) -> None:
    ObjectService(pair.owner).create(CONFIG_MAP, "default", config_map("a", {}))
    gone = ObjectService(pair.replica).delete(CONFIG_MAP, "default", "a")
    assert int(gone["metadata"]["resourceVersion"]) == pair.owner.current_rv()
    assert not pair.owner.exists(Key("", "configmaps", "default", "a"))


def test_threads_have_transactions_of_their_own_and_wait_for_the_owner_side_by_side(tmp_path: Path) -> None:
    import threading

    owner = Store(tmp_path / "flexq.db")
    ObjectService(owner)  # the namespaces a server starts with
    both = threading.Barrier(2, timeout=10)

    def commit(tx: ForeignTx) -> list[int]:
        both.wait()  # each thread's commit is under way while the other's is: none holds the store meanwhile
        return commit_foreign(owner, tx)

    replica = ReplicaStore(tmp_path / "flexq.db", commit)
    service = ObjectService(replica)
    made: dict[str, dict[str, Any]] = {}

    def create(name: str) -> None:
        made[name] = service.create(CONFIG_MAP, "default", config_map(name, {"by": name}))

    try:
        threads = [threading.Thread(target=create, args=(name,)) for name in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
        for name in ("a", "b"):  # each thread committed its own object alone, and was answered its own version
            stored = owner.get(Key("", "configmaps", "default", name))
            assert stored["data"] == {"by": name}
            assert made[name]["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    finally:
        replica.close()
        owner.close()
