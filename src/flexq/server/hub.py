"""Wakes watchers when the store commits: thread-safe notify, asyncio wait."""

from __future__ import annotations

import asyncio
import contextlib

from flexq.server.watchers import Watches
from flexq.store import Change

__all__ = ["ChangeHub"]


class ChangeHub:
    """A generation counter that async watchers wait on; :meth:`notify` may be called from any thread."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self.closed = False
        """The server is stopping: long-lived streams that check this end (see :meth:`close`)."""
        self.watches = Watches()
        """What the server's watches share: the cap on each caller's, the tally of what each resource committed."""

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()

    def committed(self, changes: list[Change]) -> None:
        """The store's listener (any thread): ``changes`` were committed."""
        self.watches.tally.add(changes)
        self.notify()

    def notify(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._fire()
        else:
            loop.call_soon_threadsafe(self._fire)

    def close(self) -> None:
        """Mark the hub closed and wake every waiter (the server is stopping)."""
        self.closed = True
        self.notify()

    def _fire(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        """Return at the next notification or after ``timeout`` seconds."""
        event = self._event
        if event is None:
            await asyncio.sleep(timeout)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
