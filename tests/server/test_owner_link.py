"""The owner's commit desk: the workers' transactions committed in groups, each whole or refused alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

from flexq.server.owner_link import GroupCommit
from flexq.store import ChangeType, ForeignTx, Key, Stale, Store
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

    async def run() -> list[list[int] | BaseException]:
        store._lock.acquire()  # the store busy (a controller's step): the transactions queue up meanwhile
        answers = asyncio.gather(*(group.commit(tx) for tx in [*txs[:2], stale, *txs[2:]]), return_exceptions=True)
        await asyncio.sleep(0.1)
        store._lock.release()
        return await answers

    try:
        answers = asyncio.run(run())
    finally:
        group.close()
    assert isinstance(answers[2], Stale)
    given = [a for i, a in enumerate(answers) if i != 2]
    assert all(isinstance(a, list) and len(a) == 2 for a in given)
    flat = [rv for a in given for rv in a]  # type: ignore[union-attr]
    assert flat == sorted(flat) and len(set(flat)) == 10
    for i in range(5):
        assert store.get(Key("", "configmaps", "default", f"b{i}"))["metadata"]["resourceVersion"] in map(str, flat)
    assert store.get(taken)["metadata"].get("name") == "taken"
    assert sum(commits) == 10 and len(commits) <= 2  # the first alone (taken before the store was free), then the rest
    store.close()


def test_a_transaction_that_is_not_one_is_refused_with_400() -> None:
    from flexq.server.owner_link import CommitDesk

    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("the commit path is the desk's")

    desk = CommitDesk(app, Store())  # type: ignore[arg-type]
    try:
        code, body = asyncio.run(desk._commit(b"{}"))
    finally:
        desk.group.close()
    assert code == 400 and b"not a transaction" in body


