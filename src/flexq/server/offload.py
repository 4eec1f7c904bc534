"""Store writes run off the event loop, in a few threads of the server's own.

A write may wait for the store (the queue controller's step holds it; another process holds the database), and
the event loop must not wait with it: reads, watches and other requests go on meanwhile. ``asyncio.to_thread``
does this at about 30 µs of CPU a call (a copy of the context, a ``concurrent.futures.Future`` with its lock and
condition, and a second future chained to it); the API's creates and patches come hundreds a second, so here a
call is a queue entry and one callback back into the loop (about 10 µs).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, Final, ParamSpec, TypeVar

__all__ = ["WORKERS", "off_loop", "set_threads"]

P = ParamSpec("P")
T = TypeVar("T")

WORKERS: Final = 2
"""Threads that run writes. The store takes one write at a time, so more threads only validate side by side under
one interpreter, and hand the store's lock to one another: on Kueue's large-scale config through the API, 16% of
six threads' time went to that hand-over, and two threads ran it in 184 s against 190 to 205 s with six."""

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class _Pool:
    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._started = False
        self._lock = threading.Lock()

    def put(self, job: _Job) -> None:
        if not self._started:
            with self._lock:
                if not self._started:
                    for n in range(self.workers):
                        threading.Thread(target=self._work, name=f"flexq-write-{n}", daemon=True).start()
                    self._started = True
        self._jobs.put(job)

    def _work(self) -> None:
        get = self._jobs.get
        while True:
            loop, future, fn, args, kwargs = get()
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the awaiting request, as to_thread does
                _call_back(loop, _fail, future, exc)
            else:
                _call_back(loop, _done, future, result)
            del loop, future, fn, args, kwargs  # nothing held while waiting for the next


_POOL = _Pool(WORKERS)


def set_threads(count: int) -> None:
    """Run writes in ``count`` threads (before the first): an API worker's writes wait for the owner's commit, not
    for the interpreter, so more of them go on at once there (see :mod:`flexq.server.worker`)."""
    global _POOL
    if _POOL._started:
        raise RuntimeError("the write threads have started")
    _POOL = _Pool(count)


async def off_loop(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in a worker thread; its result (or its exception) here. A request cancelled
    meanwhile (its client gone) does not stop ``fn``: the write it began completes, as with ``to_thread``."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    _POOL.put((loop, future, fn, args, kwargs))
    return await future


def _call_back(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (the server stopped): no one awaits
        loop.call_soon_threadsafe(fn, *args)


def _done(future: asyncio.Future[Any], result: Any) -> None:
    if not future.cancelled():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(exc)
