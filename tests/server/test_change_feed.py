"""The owner's commits reach an API worker's window over ``changes.sock``: in order, without holes, what came before
the worker connected read from the file, and the file followed while the owner cannot be reached."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flexq.server import change_feed
from flexq.server.change_feed import ChangeFeed, FeedReader, encode
from flexq.server.owner_link import read_frame
from flexq.store import Change, ChangeType, Key, ReplicaStore, Stale, Store


def _cm(name: str) -> Key:
    return Key("", "configmaps", "default", name)


def _refuse(_tx: object) -> list[int]:
    raise Stale(None, 0)  # a replica in these tests does not write


def _until(test: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.005)


def _seen(replica: ReplicaStore, since: int) -> list[tuple[int, str, str]]:
    return [(c.rv, c.type.value, c.key.name) for c in replica.changes(since)]


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "flexq.db")
    yield store
    store.close()


def test_a_worker_hears_every_commit_in_order(tmp_path: Path, owner: Store) -> None:
    replica = ReplicaStore(tmp_path / "flexq.db", _refuse, follow=0.0)
    start = replica.current_rv()
    owner.create(_cm("before"), {"metadata": {}})  # committed before the worker connects: read from the file
    feed = ChangeFeed(tmp_path / "changes.sock", owner)
    heard: list[list[Change]] = []
    replica.subscribe(heard.append)
    reader = FeedReader(tmp_path / "changes.sock", replica, follow=10.0)  # the file is not polled meanwhile
    try:
        _until(lambda: any(c.key.name == "before" for changes in heard for c in changes))
        with owner.transaction():
            owner.create(_cm("a"), {"metadata": {}})
            owner.create(_cm("b"), {"metadata": {}})
        owner.update(_cm("a"), {"metadata": {}, "data": {"x": "1"}})
        owner.delete(_cm("b"))
        _until(lambda: sum(map(len, heard)) == 5)
        # The listeners heard each commit once, in order, the transaction's two changes together.
        assert [[(c.rv - start, c.type.value, c.key.name) for c in changes] for changes in heard] == [
            [(1, "ADDED", "before")], [(2, "ADDED", "a"), (3, "ADDED", "b")], [(4, "MODIFIED", "a")],
            [(5, "DELETED", "b")]]
        assert _seen(replica, start + 3) == [(start + 4, "MODIFIED", "a"), (start + 5, "DELETED", "b")]
        assert replica.changes(start + 3)[0].obj["data"] == {"x": "1"}
    finally:
        reader.close()
        feed.close()
        replica.close()
    assert not (tmp_path / "changes.sock").exists()


def test_a_gap_between_messages_is_read_from_the_file(tmp_path: Path, owner: Store) -> None:
    replica = ReplicaStore(tmp_path / "flexq.db", _refuse, follow=0.0)
    try:
        start = replica.current_rv()
        first = owner.create(_cm("first"), {"metadata": {}})
        second = owner.create(_cm("second"), {"metadata": {}})
        assert int(second["metadata"]["resourceVersion"]) == int(first["metadata"]["resourceVersion"]) + 1
        # Only the second one's message arrives (the first was committed while the worker was not connected).
        replica.receive([(int(second["metadata"]["resourceVersion"]), "ADDED", "", "configmaps", "default", "second",
                          owner.changes(start)[1].text)])
        assert [n for _, _, n in _seen(replica, start)] == ["first", "second"]
        replica.receive([(int(first["metadata"]["resourceVersion"]), "ADDED", "", "configmaps", "default", "first",
                          owner.changes(start)[0].text)])  # heard already: passed over
        assert [n for _, _, n in _seen(replica, start)] == ["first", "second"]
    finally:
        replica.close()


def test_without_the_owner_the_file_is_followed_then_the_feed_again(tmp_path: Path, owner: Store) -> None:
    replica = ReplicaStore(tmp_path / "flexq.db", _refuse, follow=0.0)
    start = replica.current_rv()
    reader = FeedReader(tmp_path / "changes.sock", replica, follow=0.02)  # no feed yet: the file, every 0.02 s
    feed: ChangeFeed | None = None
    try:
        owner.create(_cm("while-away"), {"metadata": {}})
        _until(lambda: [n for _, _, n in _seen(replica, start)] == ["while-away"])
        feed = ChangeFeed(tmp_path / "changes.sock", owner)
        _until(lambda: len(feed._subscribers) == 1)
        reader.follow = 3600.0  # from here on only the feed can bring a change in time
        owner.create(_cm("fed"), {"metadata": {}})
        _until(lambda: [n for _, _, n in _seen(replica, start)] == ["while-away", "fed"])
    finally:
        reader.close()
        if feed is not None:
            feed.close()
        replica.close()


def test_a_worker_that_falls_behind_is_let_go(tmp_path: Path, owner: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(change_feed, "_BACKLOG", 64 * 1024)
    feed = ChangeFeed(tmp_path / "changes.sock", owner)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(tmp_path / "changes.sock"))
        assert read_frame(conn) == b"[]"  # the hello: every commit from here on is sent
        _until(lambda: len(feed._subscribers) == 1)
        noise = "x" * 16 * 1024
        for i in range(200):  # never read: the socket's buffers fill, then the backlog
            owner.create(_cm(f"c{i}"), {"metadata": {}, "data": {"x": noise + str(i)}})
            if not feed._subscribers:
                break
        assert feed._subscribers == []
    finally:
        conn.close()
        feed.close()


def test_a_message_is_a_length_and_the_rows() -> None:
    change = Change(7, ChangeType.ADDED, _cm("a"), '{"metadata":{"name":"a"}}')
    message = encode([change])
    assert int.from_bytes(message[:4], "big") == len(message) - 4
    assert message[4:] == b'[[7,"ADDED","","configmaps","default","a","{\\"metadata\\":{\\"name\\":\\"a\\"}}"]]'
