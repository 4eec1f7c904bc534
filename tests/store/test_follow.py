"""Several processes on one SQLite file: a store that follows the file sees the others' commits, in
resourceVersion order and without holes, in its window (watches, controllers) and through its listeners."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from flexq.store import Change, Gone, Key, Store
from tests.support import wait_until


def _key(name: str) -> Key:
    return Key("", "configmaps", "default", name)


def _obj(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": name}}


def test_a_following_store_sees_another_writers_commits_in_order(tmp_path: Path) -> None:
    writer = Store(tmp_path / "flexq.db")
    follower = Store(tmp_path / "flexq.db", follow=0.01)
    seen: list[int] = []
    lock = threading.Lock()

    def listen(changes: list[Change]) -> None:
        with lock:
            seen.extend(c.rv for c in changes)

    follower.subscribe(listen)
    try:
        for i in range(5):
            writer.create(_key(f"w{i}"), _obj(f"w{i}"))
        wait_until(lambda: len(seen) == 5)
        follower.create(_key("f0"), _obj("f0"))  # its own write, after the others'
        writer.create(_key("w5"), _obj("w5"))
        wait_until(lambda: len(seen) == 7)
        assert seen == list(range(1, 8)), "every commit once, in order, without holes"
        names = [c.key.name for c in follower.changes(0)]
        assert names == ["w0", "w1", "w2", "w3", "w4", "f0", "w5"]
        assert follower.get(_key("w5"))["data"] == {"n": "w5"}
    finally:
        follower.close()
        writer.close()


def test_a_store_that_does_not_follow_gets_the_others_commits_before_its_own(tmp_path: Path) -> None:
    """Its next commit publishes what came between first, read from the log."""
    other = Store(tmp_path / "flexq.db")
    store = Store(tmp_path / "flexq.db")
    published: list[str] = []
    store.subscribe(lambda changes: published.extend(c.key.name for c in changes))
    try:
        other.create(_key("a"), _obj("a"))
        other.create(_key("b"), _obj("b"))
        assert published == []
        store.create(_key("c"), _obj("c"))
        assert published == ["a", "b", "c"]
        assert [c.rv for c in store.changes(0)] == [1, 2, 3]
    finally:
        store.close()
        other.close()


def test_a_reader_behind_another_writers_compaction_gets_gone(tmp_path: Path) -> None:
    writer = Store(tmp_path / "flexq.db", history=10)
    reader = Store(tmp_path / "flexq.db")
    try:
        for i in range(30):
            writer.create(_key(f"w{i}"), _obj(f"w{i}"))
        writer.compact(10)
        with pytest.raises(Gone):
            reader.changes(5)
        assert [c.rv for c in reader.changes(25)] == [26, 27, 28, 29, 30]
        published: list[int] = []
        reader.subscribe(lambda changes: published.extend(c.rv for c in changes))
        reader.catch_up()  # what is left of the log, from where the window starts afresh
        assert published == list(range(21, 31))
    finally:
        reader.close()
        writer.close()


def test_servers_sharing_a_file_wait_for_each_others_writes_in_turn_however_long(tmp_path: Path) -> None:
    """Shared stores take a file lock around each write: one waits for the other's commit for as long as it takes
    (a lock that SQLite alone arbitrates is given up after ``busy`` seconds: ``Locked``)."""
    first = Store(tmp_path / "flexq.db", follow=0.01, busy=0.2)
    second = Store(tmp_path / "flexq.db", follow=0.01, busy=0.2)
    order: list[str] = []
    inside = threading.Event()

    def hold() -> None:
        with first.transaction():
            first.create(_key("first"), _obj("first"))
            inside.set()
            time.sleep(0.6)  # three times the busy timeout
            order.append("first committed")

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(5)
        second.create(_key("second"), _obj("second"))
        order.append("second written")
    finally:
        holder.join()
    assert order == ["first committed", "second written"]
    assert [c.key.name for c in second.changes(0)] == ["first", "second"]
    first.close()
    second.close()

