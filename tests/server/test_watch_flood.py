"""A real server process stays bounded under clients that hold it: a thousand watches of 3 MB of ConfigMaps from
``resourceVersion=0`` whose clients never read (``bench/watch_flood_bench.py``), and a client that sends its headers
too slowly. Before these bounds the thousand watches took the server past 20 GB within half a minute."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import start_server, stop_server
from tests.support.sockets import seconds_until_closed

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.long
def test_a_thousand_unread_watches_keep_the_server_small_and_answering(tmp_path: Path) -> None:
    """Five developers' thousand watches (the server's share of each, all of them answered 200; one more is 429):
    the server stays under 500 MB, answers ``/healthz`` and a list of the 3 MB at once meanwhile, and gives its
    memory back once they close. (The run stops opening watches past 600 MB, so that a server without the bounds
    does not take the machine's memory.)"""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "watch_flood_bench.py"), "--watches", "1000", "--per-user", "200",
         "--megabytes", "3", "--stop-at-mb", "600"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "TMPDIR": str(tmp_path)})  # its server's home, and the server with it in its session
    try:
        out, err = process.communicate(timeout=150)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 0, err
    figures = json.loads(out.splitlines()[-1])
    assert figures["peak_mb"] < 500, figures
    assert (figures["watches"], figures["watches_200"], figures["one_more"]) == (1000, 1000, 429), figures
    assert figures["answers"] == [200, 200] and figures["healthz_s"] < 2 and figures["list_s"] < 5, figures
    assert figures["after_mb"] < figures["before_mb"] + 100, figures


@pytest.mark.long
def test_a_client_that_sends_its_headers_slowly_is_let_go(tmp_path: Path) -> None:
    """A header a second, never done: the server closes the connection once its headers have taken 10 s."""
    srv = start_server(tmp_path / "home")
    try:
        host, port = srv.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            request = [b"GET /healthz HTTP/1.1\r\nHost: x\r\n"] + [b""] * 29
            closed_after = seconds_until_closed(sock, [start + f"X-Slow-{n}: 1\r\n".encode()
                                                       for n, start in enumerate(request)], every=1)
    finally:
        stop_server(srv)
    assert closed_after is not None and 9 < closed_after < 14, closed_after
