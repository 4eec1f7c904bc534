"""The owner's commit link: the workers' transactions committed in groups, each whole or refused alone."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from flexq.server.owner_link import Answer, CommitServer, GroupCommit, OwnerLink
from flexq.server.owner_proxy import OwnerProxy
from flexq.store import ChangeType, ForeignTx, Key, Stale, Store, StoreUnavailable
from flexq.store.codec import dumps
from flexq.store.foreign import PROVISIONAL, Put


def put(name: str, number: int) -> Put:
    body = dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": name, "namespace": "default", "resourceVersion": str(PROVISIONAL + number)}})
    return Put(ChangeType.ADDED, Key("", "configmaps", "default", name), PROVISIONAL + number, body)


def test_a_group_commits_each_transaction_whole_and_refuses_the_stale_alone(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    group = GroupCommit(store)
    taken = Key("", "configmaps", "default", "taken")
    store.create(taken, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    commits: list[int] = []
    store.subscribe(lambda changes: commits.append(len(changes)))
    txs = [ForeignTx({Key("", "configmaps", "default", f"a{i}"): None}, [], [put(f"a{i}", i), put(f"b{i}", 100 + i)])
           for i in range(5)]
    stale = ForeignTx({taken: None}, [], [put("taken", 99)])  # read as absent: it was not
    try:
        with store._lock:  # the store busy (a controller's step): the transactions queue up meanwhile
            futures: list[Future[Answer]] = [group.submit(tx) for tx in [*txs[:2], stale, *txs[2:]]]
        answers = [f.result(timeout=10) for f in futures]
    finally:
        group.close()
    assert isinstance(answers[2], Stale)
    given = [a for i, a in enumerate(answers) if i != 2]
    assert all(isinstance(a, list) and len(a) == 2 for a in given)
    flat = [rv for a in given if isinstance(a, list) for rv in a]
    assert flat == sorted(flat) and len(set(flat)) == 10
    for i in range(5):
        assert store.get(Key("", "configmaps", "default", f"b{i}"))["metadata"]["resourceVersion"] in map(str, flat)
    assert store.get(taken)["metadata"].get("name") == "taken"
    assert sum(commits) == 10 and len(commits) <= 2  # the first alone (taken before the store was free), then the rest
    store.close()


def test_a_worker_commits_through_the_socket_and_hears_refusals(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    server = CommitServer(tmp_path / "commit.sock", GroupCommit(store))
    link = OwnerLink(tmp_path / "commit.sock")
    try:
        rvs = link.commit(ForeignTx({Key("", "configmaps", "default", "x"): None}, [], [put("x", 1)]))
        assert rvs == [store.current_rv()]
        with pytest.raises(Stale):
            link.commit(ForeignTx({Key("", "configmaps", "default", "x"): None}, [], [put("x", 2)]))
        with socket.socket(socket.AF_UNIX) as raw:  # not a transaction: refused, the connection goes on
            raw.connect(str(tmp_path / "commit.sock"))
            raw.sendall(struct.pack(">I", 2) + b"{}")
            size = struct.unpack(">I", raw.recv(4))[0]
            assert b"not a transaction" in raw.recv(size)
    finally:
        server.close()
        store.close()
    with pytest.raises(StoreUnavailable, match="cannot be reached"):  # the owner is gone
        link.commit(ForeignTx({}, [], [put("y", 3)]))
    assert not (tmp_path / "commit.sock").exists()


def test_a_fault_in_a_group_reaches_every_waiting_worker(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    group = GroupCommit(store)
    broken = Put(ChangeType.ADDED, Key("", "configmaps", "default", "x"), PROVISIONAL, "not json")
    try:
        fine = group.submit(ForeignTx({}, [], [put("fine", 1)]))
        with pytest.raises(ValueError):  # heard, not waited for: the connection's thread ends, the worker sees it
            group.submit(ForeignTx({}, [], [broken])).result(timeout=10)
        fault = fine.exception(timeout=10)  # in the same group: the group's fault; in a group before it: committed
        if fault is not None:
            assert isinstance(fault, ValueError)
        else:
            stored = store.get(Key("", "configmaps", "default", "fine"))
            assert fine.result() == [int(stored["metadata"]["resourceVersion"])]
        assert group.submit(ForeignTx({}, [], [put("after", 2)])).result(timeout=10) == [store.current_rv()]
    finally:
        group.close()
        store.close()


def test_a_commit_cut_off_by_the_owner_calls_lost_before_it_fails(tmp_path: Path) -> None:
    """The owner takes the transaction and its socket closes before it answers (it was killed): the worker's
    ``lost`` is told first, then the commit fails; a worker whose owner lives keeps serving."""
    path = tmp_path / "commit.sock"
    heard: list[str] = []
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()

        def take_and_close() -> None:
            conn, _ = listener.accept()
            with conn:
                size = struct.unpack(">I", conn.recv(4))[0]
                heard.append(f"owner took {len(conn.recv(size))} bytes")

        taker = threading.Thread(target=take_and_close)
        taker.start()
        link = OwnerLink(path, lost=lambda: heard.append("lost"))
        with pytest.raises(StoreUnavailable, match="cannot be reached") as failed:
            link.commit(ForeignTx({}, [], [put("x", 1)]))
        heard.append(f"failed: {failed.value.reason}")
        taker.join(10)
    assert heard[0].startswith("owner took") and heard[1:] == ["lost", "failed: OwnerUnavailable"]


def test_a_request_cut_off_by_the_owner_calls_lost_before_it_is_answered(tmp_path: Path) -> None:
    """A request passed on to the owner, whose socket closes without an answer: ``lost`` is told before the ``503``
    goes out (a worker whose owner is exiting ends there; one whose owner lives answers)."""
    path = tmp_path / "owner.sock"
    heard: list[str] = []

    async def scenario() -> None:
        async def cut_off(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            heard.append("owner took the request")
            writer.close()

        server = await asyncio.start_unix_server(cut_off, str(path))
        proxy = OwnerProxy(path, lost=lambda: heard.append("lost"))
        scope = {"type": "http", "method": "PATCH", "path": "/apis/batch/v1/namespaces/default/jobs/j/status",
                 "raw_path": b"/apis/batch/v1/namespaces/default/jobs/j/status", "query_string": b"",
                 "headers": [(b"content-type", b"application/merge-patch+json")]}
        bodies = [{"type": "http.request", "body": b"{}", "more_body": False}]

        async def receive() -> dict[str, object]:
            return bodies.pop(0) if bodies else {"type": "http.disconnect"}

        async def send(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                heard.append(f"answered {message['status']}")

        try:
            await proxy(scope, receive, send)
        finally:
            await proxy.close()
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())
    assert heard == ["owner took the request", "lost", "answered 503"]
