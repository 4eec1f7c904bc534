"""Store writes run off the event loop, in a few threads of the server's own.

A write may wait for the store (the queue controller's step holds it; another process holds the database), and
the event loop must not wait with it: reads, watches and other requests go on meanwhile. ``asyncio.to_thread``
does this at about 30 µs of CPU a call (a copy of the context, a ``concurrent.futures.Future`` with its lock and
condition, and a second future chained to it); the API's creates and patches come hundreds a second, so here a
call is a queue entry and one callback back into the loop (about 10 µs).

Writes to the same store are committed in groups: a thread takes the writes waiting (up to :data:`GROUP`) and makes
them in one batch of the store, each a transaction of its own (one that fails is undone alone), committed together and
answered once committed. Under load creates and statuses come in bursts (Kueue's performance runner makes a job in every
queue at once; the jobs a step admitted end together), and one by one each write waited for the store's lock, which the
queue controller's step hands over between its own writes, and committed alone.

Writes that report what happened (a status: a job's end, a check's answer) go ahead of the others (creates, specs), as
the API server's priority and fairness puts controllers' requests ahead of users': a finishing job's quota stays held
while its status waits. One write in :data:`SHARE` is the oldest of the others, so that they never wait for a stream of
statuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final, ParamSpec, Protocol, TypeVar

__all__ = ["GROUP", "SHARE", "WORKERS", "Batching", "Write", "WritePool", "off_loop", "set_threads", "write_off_loop"]

P = ParamSpec("P")
T = TypeVar("T")

WORKERS: Final = 2
"""Threads that run writes. The store takes one write at a time, so more threads only validate side by side under
one interpreter, and hand the store's lock to one another: on Kueue's large-scale config through the API, 16% of
six threads' time went to that hand-over, and two threads ran it in 184 s against 190 to 205 s with six."""

SHARE: Final = 5
"""Of so many writes the pool takes in a row while others wait, one is the oldest of the others."""
GROUP: Final = 8
"""Writes to one store committed together at the most (the store's readers wait for the group's batch)."""


class Batching(Protocol):
    """A store whose writes can be grouped: :meth:`~flexq.store.BaseStore.batch`."""

    def batch(self) -> AbstractContextManager[None]: ...


@dataclass(slots=True)
class Write:
    """A call waiting for the pool, and where its answer goes."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    fn: Callable[[], Any]
    group: Batching | None
    """The store it writes to, where it may share a batch with other writes to it."""


class WritePool:
    """The threads that run writes, and the writes waiting for them (:meth:`take`: in which order and groups)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._ahead: deque[Write] = deque()
        self._rest: deque[Write] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._in_a_row = 0
        """Writes taken from ahead while others waited, since the last of the others."""
        self._started = False
        self._lock = threading.Lock()

    def put(self, write: Write, ahead: bool = False) -> None:
        if not self._started:
            with self._lock:
                if not self._started:
                    for n in range(self.workers):
                        threading.Thread(target=self._work, name=f"flexq-write-{n}", daemon=True).start()
                    self._started = True
        with self._ready:
            (self._ahead if ahead else self._rest).append(write)
            self._ready.notify()

    def take(self) -> list[Write]:
        """The next writes: the oldest of those ahead, but one in :data:`SHARE` of the others where they wait; and
        after it, in the same order, those to the same store, up to :data:`GROUP` (none after one without a store)."""
        with self._ready:
            while not self._ahead and not self._rest:
                self._ready.wait()
            taken = [self._next()]
            group = taken[0].group
            while group is not None and len(taken) < GROUP and (self._ahead or self._rest):
                if self._queue()[0].group is not group:
                    break
                taken.append(self._next())
            return taken

    def _queue(self) -> deque[Write]:
        """Where the next write comes from: ahead, but one in :data:`SHARE` from the others while they wait."""
        if self._ahead and (not self._rest or self._in_a_row < SHARE - 1):
            return self._ahead
        return self._rest

    def _next(self) -> Write:
        queue = self._queue()
        self._in_a_row = self._in_a_row + 1 if queue is self._ahead and self._rest else 0
        return queue.popleft()

    def _work(self) -> None:
        take = self.take
        while True:
            writes = take()
            group = writes[0].group
            answers: list[tuple[bool, Any]] = []
            try:
                with group.batch() if group is not None else contextlib.nullcontext():
                    for write in writes:
                        try:
                            answers.append((True, write.fn()))
                        except BaseException as exc:  # handed to the awaiting request, as to_thread does
                            answers.append((False, exc))
            except BaseException as exc:  # the group's batch (its commit): none of its writes was kept
                answers = [(False, exc if ok else answer) for ok, answer in answers]
                answers += [(False, exc)] * (len(writes) - len(answers))
            for write, (ok, answer) in zip(writes, answers, strict=True):
                _call_back(write.loop, _done if ok else _fail, write.future, answer)
            del writes, write, answers  # nothing held while waiting for the next


_POOL = WritePool(WORKERS)


def set_threads(count: int) -> None:
    """Run writes in ``count`` threads (before the first): an API worker's writes wait for the owner's commit, not
    for the interpreter, so more of them go on at once there (see :mod:`flexq.server.worker`)."""
    global _POOL
    if _POOL._started:
        raise RuntimeError("the write threads have started")
    _POOL = WritePool(count)


async def off_loop(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in a worker thread; its result (or its exception) here. A request cancelled
    meanwhile (its client gone) does not stop ``fn``: the write it began completes, as with ``to_thread``."""
    return await _queued(None, False, functools.partial(fn, *args, **kwargs))


async def write_off_loop(store: Batching | None, ahead: bool, fn: Callable[P, T], /, *args: P.args,
                         **kwargs: P.kwargs) -> T:
    """:func:`off_loop` for a write to ``store``, committed with the other writes to it waiting then (None: alone);
    ``ahead``: before the writes that are not (a status)."""
    return await _queued(store, ahead, functools.partial(fn, *args, **kwargs))


async def _queued(store: Batching | None, ahead: bool, call: Callable[[], T]) -> T:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    _POOL.put(Write(loop, future, call, store), ahead)
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
