"""The server's memory under watches whose clients never read.

    python bench/watch_flood_bench.py [--watches 1000] [--per-user 200] [--megabytes 3] [--stop-at-mb 2000]
                                      [--workers 0]

A fresh ``flexq server --runtime none`` gets ``--megabytes`` of ConfigMaps in one namespace; then ``--watches``
connections each ask for a watch of them from ``resourceVersion=0`` (the whole list first, then the changes) and
never read a byte, opened 50 at a time, ``--per-user`` for each of as many developers as that takes (the server caps
each caller's open watches). The server's resident memory (its process and its API workers together) is sampled
throughout; opening stops early where it passes ``--stop-at-mb`` (a server that buffers each watcher's list would
otherwise take the machine's memory). With the watches open, a ``/healthz`` and a list of the ConfigMaps are timed,
and each connection's status line peeked at (left unread); then the connections are closed and the memory read
again. One JSON line reports it all: RSS in MiB before, at the peak and after the close, the watches opened and how
many were answered 200, what one more watch of the first developer was answered, the two requests' seconds.

The kernel takes a few megabytes of each connection's stream into its socket buffers (not the server's memory): of a
larger list, the rest waits in the server, a slice a watch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from live_baseline import Server

NAMESPACE = "flood"
BATCH = 50
OBJECT_BYTES = 100_000


def rss_mb(pid: int) -> float:
    """Resident MiB of ``pid`` and its API workers."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            pids += [int(k) for k in (task / "children").read_text().split()]
    total = 0
    for each in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def fill(client: httpx.Client, megabytes: float) -> None:
    """ConfigMaps of about 100 kB each, ``megabytes`` of them in all, in :data:`NAMESPACE`."""
    answer = client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": NAMESPACE}})
    assert answer.status_code in (201, 409), answer.text
    for n in range(max(1, int(megabytes * 1e6 // OBJECT_BYTES))):
        text = "".join(f"{n:04d}{i:08d}" for i in range(OBJECT_BYTES // 12))  # not all alike: as real data
        answer = client.post(f"/api/v1/namespaces/{NAMESPACE}/configmaps", json={
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{n}"}, "data": {"text": text}})
        assert answer.status_code == 201, answer.text


def developers(client: httpx.Client, count: int) -> list[str]:
    """Tokens of ``count`` developers of :data:`NAMESPACE`."""
    tokens = []
    for n in range(count):
        answer = client.post("/flexq/v1/tokens", json={"role": "developer", "namespace": NAMESPACE,
                                                       "name": f"flood-{n}"})
        assert answer.status_code == 201, answer.text
        tokens.append(answer.json()["token"])
    return tokens


def answered(sock: socket.socket) -> str:
    """The status code a connection was answered with, peeked at (left unread); "" where none came."""
    sock.settimeout(1)
    try:
        head = sock.recv(12, socket.MSG_PEEK)
    except OSError:
        return ""
    return head[9:12].decode(errors="replace")


def unread_watch(port: int, token: str) -> socket.socket:
    """A connection that asks for a watch from resourceVersion 0 and reads nothing."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.sendall(f"GET /api/v1/namespaces/{NAMESPACE}/configmaps?watch=1&resourceVersion=0 HTTP/1.1\r\n"
                 f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    return sock


def flood(port: int, token: str, tokens: list[str], pid: int, watches: int, stop_at_mb: float) -> dict[str, Any]:
    """Open ``watches`` unread watches, as many for each of ``tokens`` (fewer where the server passes
    ``stop_at_mb``), time two requests beside them (as ``token``), close them; the figures."""
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    before = rss_mb(pid)
    peak = before
    socks: list[socket.socket] = []
    figures: dict[str, Any] = {}
    try:
        while len(socks) < watches and peak < stop_at_mb:
            for _ in range(min(BATCH, watches - len(socks))):
                socks.append(unread_watch(port, tokens[len(socks) * len(tokens) // watches]))
            time.sleep(0.3)
            peak = max(peak, rss_mb(pid))
        settle = time.monotonic() + 5
        while time.monotonic() < settle and peak < stop_at_mb:
            time.sleep(0.5)
            peak = max(peak, rss_mb(pid))
        if peak < stop_at_mb:
            started = time.monotonic()
            healthz = httpx.get(f"{base}/healthz", timeout=30)
            figures["healthz_s"] = round(time.monotonic() - started, 3)
            started = time.monotonic()
            listed = httpx.get(f"{base}/api/v1/namespaces/{NAMESPACE}/configmaps", headers=headers, timeout=30)
            figures["list_s"] = round(time.monotonic() - started, 3)
            figures["answers"] = [healthz.status_code, listed.status_code]
            codes = [answered(sock) for sock in socks]
            figures["watches_200"] = codes.count("200")
            one_more = httpx.get(f"{base}/api/v1/namespaces/{NAMESPACE}/configmaps", timeout=30,
                                 params={"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"},
                                 headers={"Authorization": f"Bearer {tokens[0]}"})
            figures["one_more"] = one_more.status_code  # of the first developer: past their share where it is full
            peak = max(peak, rss_mb(pid))
        figures["with_watches_mb"] = round(rss_mb(pid), 1)
    finally:
        opened = len(socks)
        for sock in socks:
            sock.close()
    deadline = time.monotonic() + 10
    after = rss_mb(pid)
    while time.monotonic() < deadline and after > before + 50:
        time.sleep(0.5)
        after = rss_mb(pid)
    return {"watches": opened, "before_mb": round(before, 1), "peak_mb": round(peak, 1), "after_mb": round(after, 1),
            **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watches", type=int, default=1000)
    parser.add_argument("--per-user", type=int, default=200)
    parser.add_argument("--megabytes", type=float, default=3.0)
    parser.add_argument("--stop-at-mb", type=float, default=2000.0)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flexq-flood-") as tmp:
        server = Server(Path(tmp) / "home", None, None, args.workers)
        try:
            token = server.ready()
            with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
                fill(c, args.megabytes)
                tokens = developers(c, -(-args.watches // args.per_user))
            found = flood(server.port, token, tokens, server.pid(), args.watches, args.stop_at_mb)
        finally:
            server.stop()
    print(json.dumps({"megabytes": args.megabytes, **found}))


if __name__ == "__main__":
    main()
