"""Watch streams: the changes to one resource, from a resourceVersion on, as the API server sends them.

Each watcher reads the store's change log for its own resource only (the store filters by resource before
any body is parsed), and sends all the frames one read found in one chunk: under load a watcher gets a few
large writes instead of one write per change. A resourceVersion older than the log's window gets the API
server's ERROR frame with a 410 Expired status, after which kubectl and informers list again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from fastapi import Request

from flexq.api import KindInfo
from flexq.objects import ObjectService, table
from flexq.server.hub import ChangeHub
from flexq.server.status import status_body
from flexq.store import Change, Gone

__all__ = ["ASK_EVERY", "watch_stream"]

ASK_EVERY = 1.0
"""Seconds between two questions of an idle watch to its client: are you still there?"""


def watch_stream(request: Request, service: ObjectService, hub: ChangeHub, info: KindInfo, version: str,
                 namespace: str | None, selected: Callable[[dict[str, Any]], bool] | None, as_table: bool, start: str,
                 timeout: float) -> AsyncIterator[bytes]:
    """``selected``: the label and field selectors' test (None: every object of ``namespace``, or of all)."""
    resources = frozenset({(info.group, info.plural)})
    # Objects sent as stored (no selector to test, no conversion, no table) are framed from their text: a watch of a
    # busy resource (the Workloads that a runner follows) then parses nothing.
    as_stored = selected is None and not as_table and version == info.storage_version

    def frame(kind: str, obj: dict[str, Any]) -> bytes:
        shown = service._to(info, obj, version)
        if as_table:
            shown = table(info, [shown], shown["metadata"].get("resourceVersion", ""))
        return orjson.dumps({"type": kind, "object": shown}) + b"\n"

    def frames_of(changes: list[Change]) -> list[bytes]:
        # The store keys each change by the object's namespace: the namespace is told apart before any parsing.
        ours = [change for change in changes if namespace is None or change.key.namespace == namespace]
        if as_stored:
            return [b'{"type":"' + change.type.value.encode() + b'","object":' + change.text.encode() + b"}\n"
                    for change in ours]
        return [frame(change.type.value, change.obj) for change in ours if selected is None or selected(change.obj)]

    async def stream() -> AsyncIterator[bytes]:
        since: int
        if start in ("", "0"):
            items, since = service.list_objects(info, namespace, version)  # of the namespace alone
            initial = [frame("ADDED", item) for item in items if selected is None or selected(item)]
            if initial:
                yield b"".join(initial)
        else:
            since = int(start)
        deadline = time.monotonic() + timeout
        asked = -ASK_EVERY
        while time.monotonic() < deadline and not hub.closed:  # a stopping server ends its watches: clients watch again
            try:
                changes, reached = service.store.changes_of(since, resources)
            except Gone as exc:
                yield orjson.dumps({"type": "ERROR", "object": status_body(410, "Expired", str(exc))}) + b"\n"
                return
            frames = frames_of(changes)
            if frames:
                yield b"".join(frames)
            if reached == since:
                # Idle: ask whether the client is gone, at most every ASK_EVERY seconds. (The ASGI server's own
                # listener cancels the stream when it goes; a watch woken by every commit of other resources does
                # not ask each time: each ask costs a cancel scope and a task's repr.)
                now = time.monotonic()
                if now - asked >= ASK_EVERY:
                    asked = now
                    if await request.is_disconnected():
                        return
                await hub.wait(min(1.0, max(0.0, deadline - time.monotonic())))
            else:
                await asyncio.sleep(0)
            since = reached

    return stream()
