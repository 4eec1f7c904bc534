"""Two stores on one PostgreSQL database, as two servers have them: each sees the other's writes, in order."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from flexq.store import Conflict, Gone, Key
from tests.store.conftest import OpenStore
from tests.support import wait_until


@pytest.fixture
def backend() -> str:
    return "postgresql"


def _cm(name: str) -> tuple[Key, dict[str, Any]]:
    return Key("", "configmaps", "default", name), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}


@pytest.fixture
def pair(open_store: OpenStore) -> Iterator[tuple[Any, Any]]:
    yield open_store(poll=0.2), open_store(poll=0.2)


def test_a_store_sees_the_other_stores_writes_in_order(pair: tuple[Any, Any]) -> None:
    one, two = pair
    woken = threading.Event()
    two.subscribe(lambda _changes: woken.set())
    one.create(*_cm("a"))
    two.create(*_cm("b"))  # published by two at once, after a's change read from the log
    one.create(*_cm("c"))
    wait_until(lambda: [c.key.name for c in two.changes(0)] == ["a", "b", "c"])
    assert woken.is_set()
    assert [c.rv for c in two.changes(0)] == [1, 2, 3]
    assert [o["metadata"]["name"] for o in two.list_objects("", "configmaps")[0]] == ["a", "b", "c"]


def test_optimistic_concurrency_holds_across_stores(pair: tuple[Any, Any]) -> None:
    one, two = pair
    created = one.create(*_cm("a"))
    two.update(_cm("a")[0], {**created, "data": {"x": "1"}})
    with pytest.raises(Conflict):
        one.update(_cm("a")[0], {**created, "data": {"x": "2"}})
    assert one.get(_cm("a")[0])["data"] == {"x": "1"}


def test_writers_of_two_stores_take_turns(pair: tuple[Any, Any]) -> None:
    one, two = pair

    def write(store: Any, prefix: str) -> None:
        for i in range(40):
            with store.transaction():
                store.create(*_cm(f"{prefix}{i}"))
                store.create(*_cm(f"{prefix}{i}-b"))

    threads = [threading.Thread(target=write, args=(s, p)) for s, p in ((one, "x"), (two, "y"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_until(lambda: len(one.changes(0, limit=500)) == 160 and len(two.changes(0, limit=500)) == 160)
    for store in pair:
        changes = store.changes(0, limit=500)
        assert [c.rv for c in changes] == list(range(1, 161)), "no gaps, no reordering"
        pairs = {c.key.name: c.rv for c in changes}
        assert all(pairs[f"{p}{i}-b"] == pairs[f"{p}{i}"] + 1 for p in "xy" for i in range(40)), "transactions whole"


def test_a_compaction_by_the_other_store_makes_old_resumes_gone(open_store: OpenStore) -> None:
    one, two = open_store(poll=0.2), open_store(follow=False)
    for i in range(5):
        one.create(*_cm(f"c{i}"))
    assert two.compact(keep=2) == 3
    with pytest.raises(Gone):
        open_store(follow=False).changes(1)  # read from the log: its compaction mark says what is gone
    assert [c.rv for c in open_store(follow=False).changes(3)] == [4, 5]


def test_a_long_batch_goes_on_in_new_transactions_and_still_undoes_each_failure_alone(open_store: OpenStore) -> None:
    store = open_store(follow=False)
    seen: list[int] = []
    store.subscribe(lambda changes: seen.extend(c.rv for c in changes))
    with store.batch():
        for i in range(150):  # past the savepoints one PostgreSQL transaction takes before it slows down
            try:
                with store.transaction():
                    store.create(*_cm(f"c{i}"))
                    if i % 10 == 0:
                        raise ValueError("undone")
            except ValueError:
                pass
    names = [c.key.name for c in store.changes(0, limit=500)]
    assert names == [f"c{i}" for i in range(150) if i % 10], "each failure undone alone, the rest in order"
    assert seen == list(range(1, 136))


def test_stores_connect_again_after_their_connections_are_cut(open_store: OpenStore, postgres_url: str) -> None:
    import psycopg

    one, two = open_store(poll=0.2), open_store(follow=False)
    one.create(*_cm("a"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    assert one.get(_cm("a")[0])["metadata"]["name"] == "a"
    one.create(*_cm("b"))
    two.create(*_cm("c"))  # seen by one once its follower is connected again
    wait_until(lambda: [c.key.name for c in one.changes(0)] == ["a", "b", "c"])
