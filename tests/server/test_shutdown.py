"""A stopping server ends its open streams itself (watches, followed logs): its clients see each stream end whole,
and watch or follow again; nothing is cut off at the end of the grace period, and its log holds no error."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
import pytest

from flexq.server.logs import follow_log
from tests import admin
from tests.conftest import start_server, stop_server

WATCH = "/apis/kueue.x-k8s.io/v1beta2/workloads"


@pytest.mark.parametrize("workers", ["0", "1"])
def test_a_stopping_server_ends_its_open_watches_whole(tmp_path: Path, workers: str) -> None:
    srv = start_server(tmp_path / "home", "--workers", workers)
    ended: list[str] = []
    opened = threading.Event()

    def watch() -> None:
        try:
            with admin.client(srv.url, timeout=httpx.Timeout(10, read=30)) as client, \
                    client.stream("GET", WATCH, params={"watch": "true"}) as answer:
                opened.set()
                for _ in answer.iter_lines():
                    pass
            ended.append("whole")
        except httpx.HTTPError as exc:
            ended.append(f"cut off: {exc!r}")

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert opened.wait(20)
        srv.process.terminate()
        srv.process.wait(timeout=30)
        watcher.join(30)
        assert srv.process.stderr is not None
        log = srv.process.stderr.read().decode()
    finally:
        stop_server(srv)
        watcher.join(30)
    assert ended == ["whole"]
    assert "Traceback" not in log and "ERROR" not in log, log


def test_a_followed_log_ends_when_the_server_stops(tmp_path: Path) -> None:
    log = tmp_path / "driver.log"
    log.write_text("step 1\n")
    stopping = threading.Event()

    async def follow() -> list[bytes]:
        chunks = []
        async for chunk in follow_log(log, stopping.is_set):
            chunks.append(chunk)
            log.write_text("step 1\nstep 2\n")
            if len(chunks) == 2:
                stopping.set()  # no end marker: only the server's stop ends the stream
        return chunks

    assert asyncio.run(asyncio.wait_for(follow(), 10)) == [b"step 1\n", b"step 2\n"]
