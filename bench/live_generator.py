"""The live benchmarks' load generator, in a process of its own: it creates the batch/v1 Jobs on their schedule.

    python bench/live_generator.py PLAN RESULT

``PLAN`` (JSON, written by ``live_baseline.py``): the server's ``base`` URL, the administrator's ``token``, the
``concurrency`` (create requests in flight at most) and the ``jobs`` as ``[at, job]`` pairs (``at``: seconds after
the first creation). Once ready, it prints the first creation's time on the machine's monotonic clock (which every
process shares) and starts.

``RESULT`` (JSON, written when every create is answered, or on SIGTERM with what was done by then): when each Job's
create was sent (monotonic clock), how late each was sent against its schedule, when each was answered (seconds
after ``t0``), the creates refused, and this process's CPU seconds. Apart from the watcher and the runner (the
benchmark's own process), the creates keep their schedule however busy the watch stream is, and the report can
tell whether the generator itself fell behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from live_baseline import url_of


class Generator:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.base: str = plan["base"]
        self.t0 = 0.0
        self.jobs: list[tuple[float, dict[str, Any]]] = [(at, job) for at, job in plan["jobs"]]
        self.concurrency: int = plan["concurrency"]
        self.token: str = plan["token"]
        self.sent: dict[str, float] = {}
        self.late: list[float] = []
        self.answered: list[float] = []
        self.refused: list[str] = []

    async def create(self, session: aiohttp.ClientSession, limit: asyncio.Semaphore, at: float,
                     job: dict[str, Any]) -> None:
        async with limit:
            key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
            now = time.monotonic()
            self.sent[key] = now
            self.late.append(now - self.t0 - at)
            async with session.post(self.base + url_of(job), data=json.dumps(job),
                                    headers={"content-type": "application/json"}) as r:
                text = await r.read()
                if r.status != 201:
                    self.refused.append(f"{key}: {r.status} {text[:200]!r}")
            self.answered.append(time.monotonic() - self.t0)

    async def generate(self) -> None:
        limit = asyncio.Semaphore(self.concurrency)
        connector = aiohttp.TCPConnector(limit=self.concurrency + 4)
        headers = {"Authorization": f"Bearer {self.token}"}
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            tasks = []
            for at, job in self.jobs:
                delay = self.t0 + at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.ensure_future(self.create(session, limit, at, job)))
            try:
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    def result(self) -> dict[str, Any]:
        return {"sent": self.sent, "late": self.late, "answered": self.answered, "refused": self.refused,
                "cpu_s": sum(os.times()[:2])}


async def run(generator: Generator) -> None:
    task = asyncio.ensure_future(generator.generate())
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task


def main() -> None:
    plan, out = Path(sys.argv[1]), Path(sys.argv[2])
    generator = Generator(json.loads(plan.read_text()))
    generator.t0 = time.monotonic()
    print(generator.t0, flush=True)
    try:
        asyncio.run(run(generator))
    finally:
        out.write_text(json.dumps(generator.result()))


if __name__ == "__main__":
    main()
