"""Writes run off the event loop: the result or the exception comes back to the request, the loop goes on
meanwhile, and a request that went away does not stop the write it began."""

from __future__ import annotations

import asyncio
import threading

import pytest

from flexq.server.offload import WORKERS, off_loop


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
