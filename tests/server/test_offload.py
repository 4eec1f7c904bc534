"""Writes run off the event loop: the result or the exception comes back to the request, the loop goes on
meanwhile, and a request that went away does not stop the write it began. Statuses go ahead of the other writes
waiting, not for good; writes to one store waiting together are committed in one batch, and answered after it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import pytest

from flexq.server.offload import GROUP, SHARE, WORKERS, Write, WritePool, off_loop, write_off_loop
from flexq.store import StoreUnavailable


def test_results_and_exceptions_come_back_from_another_thread() -> None:
    async def main() -> None:
        loop_thread = threading.get_ident()
        result, thread = await off_loop(lambda a, *, b: (a + b, threading.get_ident()), 1, b=2)
        assert result == 3 and thread != loop_thread

        def refuse() -> None:
            raise KeyError("no such object")

        with pytest.raises(KeyError, match="no such object"):
            await off_loop(refuse)

    asyncio.run(main())


def test_the_loop_goes_on_while_writes_wait_and_they_run_side_by_side() -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    def blocked(n: int) -> int:
        entered.release()
        assert release.wait(10)
        return n

    async def main() -> None:
        writes = [asyncio.ensure_future(off_loop(blocked, n)) for n in range(WORKERS)]
        ticks = 0
        for _ in range(WORKERS):  # every write is under way at once, and the loop goes on meanwhile
            while not entered.acquire(blocking=False):
                await asyncio.sleep(0.005)
                ticks += 1
                assert ticks < 2000, "the writes did not all start"
        release.set()
        assert await asyncio.gather(*writes) == list(range(WORKERS))

    asyncio.run(main())


def test_a_cancelled_request_leaves_its_write_to_complete() -> None:
    started, finish, done = threading.Event(), threading.Event(), threading.Event()

    def write() -> str:
        started.set()
        assert finish.wait(10)
        done.set()
        return "written"

    async def main() -> None:
        request = asyncio.ensure_future(off_loop(write))
        while not started.is_set():
            await asyncio.sleep(0.01)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        finish.set()
        assert await off_loop(done.wait, 10)  # the next call is served: the worker was not lost
        assert await off_loop(lambda: "next") == "next"

    asyncio.run(main())


class _Store:
    """A store's batches as the pool uses them: which writes ran in each, and when each was committed."""

    def __init__(self, fail_commit: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.log: list[str] = []
        self.fail_commit = fail_commit

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        self.batches.append([])
        yield
        if self.fail_commit:
            raise StoreUnavailable("the disk is full", "WriteFailed")
        self.log.append(f"commit {len(self.batches)}")

    def write(self, name: str) -> str:
        self.batches[-1].append(name)
        self.log.append(name)
        if name.startswith("bad"):
            raise KeyError(name)
        return name


def _queue(pool: WritePool, loop: asyncio.AbstractEventLoop, names: str, store: _Store | None = None,
           ahead: bool = False) -> None:
    for name in names.split():
        pool.put(Write(loop, loop.create_future(), lambda name=name: name, store), ahead)


def _taken(pool: WritePool, count: int) -> list[list[str]]:
    return [[write.fn() for write in pool.take()] for _ in range(count)]


def test_statuses_go_ahead_of_the_writes_waiting_before_them_but_not_for_good() -> None:
    """Writes to no store, one at a time: those ahead first, one in SHARE of the others while they wait."""
    pool, loop = WritePool(0), asyncio.new_event_loop()
    try:
        _queue(pool, loop, "c1 c2 c3")
        _queue(pool, loop, "s1 s2 s3 s4 s5 s6 s7 s8 s9", ahead=True)
        order = [name for taken in _taken(pool, 12) for name in taken]
    finally:
        loop.close()
    assert SHARE == 5
    assert order == ["s1", "s2", "s3", "s4", "c1", "s5", "s6", "s7", "s8", "c2", "s9", "c3"]


def test_writes_to_one_store_are_taken_together_in_the_order_they_go() -> None:
    store, other = _Store(), _Store()
    pool, loop = WritePool(0), asyncio.new_event_loop()
    try:
        _queue(pool, loop, " ".join(f"c{n}" for n in range(GROUP + 2)), store)
        _queue(pool, loop, "s1", store, ahead=True)
        _queue(pool, loop, "o1 o2", other)
        _queue(pool, loop, "n1")
        _queue(pool, loop, "o3", other)
        taken = _taken(pool, 5)
    finally:
        loop.close()
    assert taken == [["s1", *(f"c{n}" for n in range(GROUP - 1))], ["c7", "c8", "c9"], ["o1", "o2"], ["n1"], ["o3"]]


def test_a_group_is_committed_once_and_answered_after_its_commit_a_failed_write_alone() -> None:
    store = _Store()
    release = threading.Event()

    async def main() -> None:
        # Both threads held up, so that the writes queue behind them and are taken as groups.
        holds = [asyncio.ensure_future(off_loop(release.wait, 10)) for _ in range(WORKERS)]
        await asyncio.sleep(0.05)
        names = ["w1", "bad2", "w3", "w4"]
        writes = [asyncio.ensure_future(write_off_loop(store, False, store.write, name)) for name in names]
        for name, write in zip(names, writes, strict=True):
            write.add_done_callback(lambda _, name=name: store.log.append(f"answered {name}"))
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(*holds)
        answers = await asyncio.gather(*writes, return_exceptions=True)
        assert answers[0] == "w1" and isinstance(answers[1], KeyError) and answers[2:] == ["w3", "w4"]

    asyncio.run(main())
    assert store.batches == [["w1", "bad2", "w3", "w4"]], "one batch: those waiting when a thread was free"
    assert store.log == ["w1", "bad2", "w3", "w4", "commit 1", "answered w1", "answered bad2", "answered w3",
                         "answered w4"], "answered once committed"


def test_a_group_whose_commit_fails_answers_each_write_with_the_failure() -> None:
    store = _Store(fail_commit=True)
    release = threading.Event()

    async def main() -> None:
        holds = [asyncio.ensure_future(off_loop(release.wait, 10)) for _ in range(WORKERS)]
        await asyncio.sleep(0.05)
        writes = [asyncio.ensure_future(write_off_loop(store, False, store.write, name)) for name in ("w1", "bad2")]
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(*holds)
        first, second = await asyncio.gather(*writes, return_exceptions=True)
        assert isinstance(first, StoreUnavailable), "written, then not committed: refused"
        assert isinstance(second, KeyError), "refused itself: its own refusal"

    asyncio.run(main())
