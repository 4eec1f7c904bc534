"""A watch asks whether its client is gone while it is idle, not at every read of a busy stream (whose writes fail
when the client is gone), and ends once an idle watch's client has left."""

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
    # Asked once before the first read, not during the three busy reads after it; then, idle, asked again and gone.
    assert client.asked == 2
