"""A watch asks whether its client is gone while it is idle (at most every ``ASK_EVERY`` seconds), not at every read of
a busy stream (whose writes fail when the client is gone), and ends once an idle watch's client has left."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from fastapi import Request

from flexq.api.kinds import resolve
from flexq.objects.service import ObjectService
from flexq.server.hub import ChangeHub
from flexq.server.watch import watch_stream
from flexq.store import Key, Store


class _Client:
    """The request as the watch sees it: gone after ``stays`` questions."""

    def __init__(self, stays: int) -> None:
        self.asked = 0
        self.stays = stays

    async def is_disconnected(self) -> bool:
        self.asked += 1
        return self.asked > self.stays


def _config_map(store: Store, name: str) -> None:
    store.create(Key("", "configmaps", "default", name),
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"n": name}})


def test_a_busy_watch_does_not_ask_and_an_idle_one_ends_when_its_client_left() -> None:
    store = Store()
    _config_map(store, "first")
    since = str(store.current_rv() - 1)
    client = _Client(stays=1)
    info = resolve("ConfigMap")
    stream = watch_stream(cast(Request, client), ObjectService(store), ChangeHub(), info, "v1", None, None, False,
                          since, timeout=30.0)

    async def follow() -> list[list[str]]:
        chunks: list[list[str]] = []
        async for chunk in stream:
            chunks.append([json.loads(line)["object"]["metadata"]["name"] for line in chunk.splitlines()])
            if len(chunks) < 4:  # busy: a change waits at each read
                _config_map(store, f"more-{len(chunks)}")
        return chunks

    chunks: list[Any] = asyncio.run(asyncio.wait_for(follow(), 10))
    assert chunks == [["first"], ["more-1"], ["more-2"], ["more-3"]]
    # Not asked during the four busy reads; then, idle, asked once (still there) and a second later again (gone).
    assert client.asked == 2


def test_a_watch_woken_by_other_resources_does_not_ask_at_each_wake() -> None:
    """Commits of other resources wake every watch; one that finds nothing of its own asks its client at most
    every ASK_EVERY seconds, not at each wake (each ask costs the event loop a cancel scope)."""
    store = Store()
    _config_map(store, "first")
    since = str(store.current_rv() - 1)
    client = _Client(stays=10**6)
    hub = ChangeHub()
    stream = watch_stream(cast(Request, client), ObjectService(store), hub, resolve("ConfigMap"), "v1", None, None,
                          False, since, timeout=0.6)

    async def others() -> None:
        for n in range(40):
            store.create(Key("", "secrets", "default", f"s-{n}"),
                         {"apiVersion": "v1", "kind": "Secret", "metadata": {}, "data": {}})
            hub.notify()
            await asyncio.sleep(0.01)

    async def follow() -> list[bytes]:
        hub.bind(asyncio.get_running_loop())
        writer = asyncio.ensure_future(others())
        chunks = [chunk async for chunk in stream]
        await writer
        return chunks

    chunks = asyncio.run(asyncio.wait_for(follow(), 10))
    assert [json.loads(line)["object"]["metadata"]["name"] for c in chunks for line in c.splitlines()] == ["first"]
    assert client.asked == 1
