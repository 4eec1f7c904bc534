"""What one client may hold of the server stays bounded: a watch whose client does not read is cut off once it falls
too far behind (and its client resumes from the last resourceVersion it read); a response nobody reads is cut off
after the write-stall limit; a caller has at most its share of open watches (429 past it); headers and bodies that
come too slowly (or headers too large) end their connection; and none of it touches a long response once its request
has come whole (a watch, a WebSocket). The servers here run in this process, with flexq's protocol under short limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, TextMessage
from wsproto.events import Request as WsRequest

from flexq.auth import ANONYMOUS, Role, TokenBook
from flexq.objects.service import ObjectService
from flexq.server.app import create_app
from flexq.server.authn import Authenticator
from flexq.server.connection import LIMITS, Limits, bounded_protocol
from flexq.server.serving import uvicorn_servers
from flexq.server.watch import PIECE, _pieces_of
from flexq.server.watchers import Listing, Listings, Tally
from flexq.store import Change, ChangeType, Key, Store
from tests.server.inprocess import serving
from tests.support.sockets import seconds_until_closed

SHORT = Limits(header_seconds=0.5, header_bytes=64 * 1024, body_idle_seconds=0.5, write_stall_seconds=60.0)
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MEGABYTE = 1_000_000


@contextlib.contextmanager
def _served(app: Any, limits: Limits = SHORT) -> Iterator[str]:
    with serving(app, http=bounded_protocol(limits), ws="wsproto", timeout_keep_alive=30) as url:
        yield url


def _connect(url: str, receive_buffer: int | None = None) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect((host, int(port)))
    return sock


def _read_to_end(sock: socket.socket, within: float) -> tuple[bytes, bool]:
    """What ``sock`` gets until the server closes it (True) or ``within`` seconds pass (False)."""
    got = bytearray()
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            break
        except ConnectionResetError:
            return bytes(got), True
        if not chunk:
            return bytes(got), True
        got += chunk
    return bytes(got), False


def _eventually(check: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _config_map(store: Store, name: str, size: int = 10) -> None:
    store.create(Key("", "configmaps", "default", name),
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"text": "x" * size}})


def _watch_lines(answer: bytes) -> list[dict[str, Any]]:
    """The whole frames of a (maybe cut off) chunked watch answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    data = bytearray()
    while body:
        size_line, sep, rest = body.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line, 16)
        data += rest[:size]
        if size == 0 or len(rest) < size + 2:
            break
        body = rest[size + 2:]
    return [json.loads(line) for line in bytes(data).split(b"\n")[:-1]]


def _follow(url: str, since: str, until: str, into: list[str]) -> None:
    """The names of the objects a watch from ``since`` reports, into ``into``, until one named ``until``."""
    with httpx.Client(base_url=url, timeout=httpx.Timeout(10, read=30)) as client, \
            client.stream("GET", CONFIGMAPS, params={"watch": "1", "resourceVersion": since}) as answer:
        for line in answer.iter_lines():
            into.append(json.loads(line)["object"]["metadata"]["name"])
            if into[-1] == until:
                return


# --- watches -------------------------------------------------------------------------------------


def test_a_watcher_that_does_not_read_is_cut_off_and_resumes_from_its_last_resource_version() -> None:
    """Its client reads nothing while 20 MB of its resource are committed: once more than the watch's backlog bound
    waits for it, the server closes it (a watcher reading beside it is not touched); the client gets what was already
    on its way, and a watch from the last resourceVersion in it gets every later change."""
    store = Store()
    app = create_app(ObjectService(store))
    slots = app.state.hub.watches.slots
    names = [f"cm-{n:02d}" for n in range(20)]
    with _served(app, LIMITS) as url:
        since = str(store.current_rv())
        reader: list[str] = []
        follower = threading.Thread(target=_follow, args=(url, since, names[-1], reader))
        follower.start()
        slow = _connect(url, receive_buffer=16384)
        try:
            slow.sendall(f"GET {CONFIGMAPS}?watch=1&resourceVersion={since} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert _eventually(lambda: slots.held(ANONYMOUS.user) == 2, 10)
            for name in names:
                _config_map(store, name, MEGABYTE)
            follower.join(30)
            cut = _eventually(lambda: slots.held(ANONYMOUS.user) == 0, 15)
            answer, closed = _read_to_end(slow, 20)
        finally:
            slow.close()
            follower.join(30)
        assert cut and closed, "the watcher that does not read is cut off"
        frames = _watch_lines(answer)
        assert 0 < len(frames) < len(names), "it got what was on its way: part of the changes"
        resumed: list[str] = []
        _follow(url, frames[-1]["object"]["metadata"]["resourceVersion"], names[-1], resumed)
    assert [f["object"]["metadata"]["name"] for f in frames] + resumed == names
    assert reader == names, "the watcher that reads gets every change"


def test_a_response_nobody_reads_is_cut_off_after_the_write_stall() -> None:
    """A watch of 8 MB of objects from resourceVersion 0 whose client reads nothing, with nothing committed after:
    not behind any change, it is still cut off once its writes have waited the write-stall limit."""
    store = Store()
    for n in range(8):
        _config_map(store, f"cm-{n}", MEGABYTE)
    app = create_app(ObjectService(store))
    slots = app.state.hub.watches.slots
    with _served(app, Limits(write_stall_seconds=1.0)) as url:
        sock = _connect(url, receive_buffer=16384)
        try:
            sock.sendall(f"GET {CONFIGMAPS}?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert _eventually(lambda: slots.held(ANONYMOUS.user) == 1, 10)
            started = time.monotonic()
            assert _eventually(lambda: slots.held(ANONYMOUS.user) == 0, 10), "cut off"
            assert time.monotonic() - started > 0.5
            answer, closed = _read_to_end(sock, 20)
        finally:
            sock.close()
    assert closed
    assert len(_watch_lines(answer)) < 8, "the rest of its list was dropped"


def test_each_caller_has_at_most_its_share_of_open_watches(tmp_path: Path) -> None:
    """Past its share a caller's watch is answered 429 with a Status (another caller's is not); a watch that ends
    gives its place back."""
    book = TokenBook(tmp_path)
    first, _ = book.create(Role.DEVELOPER, "team-a")
    second, _ = book.create(Role.DEVELOPER, "team-a")
    app = create_app(ObjectService(Store()), auth=Authenticator(book, anonymous=False))
    app.state.hub.watches.slots.per_user = 2
    path = "/api/v1/namespaces/team-a/configmaps"
    params = {"watch": "1"}
    with _served(app) as url, httpx.Client(base_url=url, timeout=httpx.Timeout(10, read=30)) as client, \
            contextlib.ExitStack() as open_watches:
        def watch(token: str) -> httpx.Response:
            return open_watches.enter_context(client.stream("GET", path, params=params,
                                                            headers={"Authorization": f"Bearer {token}"}))

        assert [watch(first).status_code for _ in range(2)] == [200, 200]
        refused = client.get(path, params=params, headers={"Authorization": f"Bearer {first}"})
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        body = refused.json()
        assert (body["kind"], body["reason"], body["code"], body["details"]) == \
            ("Status", "TooManyRequests", 429, {"retryAfterSeconds": 1})
        assert "\n" not in body["message"] and "2 at most" in body["message"]
        assert watch(second).status_code == 200, "another caller's count is its own"
        open_watches.close()
        assert _eventually(lambda: client.get(path, params={**params, "timeoutSeconds": "1"},
                                              headers={"Authorization": f"Bearer {first}"}).status_code == 200, 10)


def test_watches_of_the_same_selection_share_one_listing() -> None:
    """Watches that start together share one listing, made once; a later one takes it while nothing of its resource
    changed; after a change (once it is no longer fresh) a new one is made; a listing of its own is never shared."""
    async def run() -> None:
        tally = Tally()
        listings = Listings(tally, fresh=0.05)
        made: list[int] = []

        def make() -> Listing:
            made.append(1)
            return Listing(len(made), tally.read(counted), time.monotonic(), b"frames")

        key = ("", "configmaps", "default", "v1", "", "", False)
        counted = ("", "configmaps", "default")
        first, second = await asyncio.gather(listings.get(key, counted, make), listings.get(key, counted, make))
        assert first is second and len(made) == 1
        await asyncio.sleep(0.1)
        assert await listings.get(key, counted, make) is first and len(made) == 1, "unchanged: shared"
        tally.add([Change(9, ChangeType.ADDED, Key("", "configmaps", "other", "x"), "{}")])
        assert await listings.get(key, counted, make) is first, "a change in another namespace is not its"
        tally.add([Change(10, ChangeType.ADDED, Key("", "configmaps", "default", "x"), "{}")])
        assert await listings.get(key, counted, make) is not first and len(made) == 2
        assert await listings.get(None, counted, make) is not await listings.get(None, counted, make)

    asyncio.run(run())


@pytest.mark.parametrize(("sizes", "pieces"), [
    pytest.param([10, 10], [20], id="small frames joined"),
    pytest.param([PIECE - 5, 10], [PIECE - 5, 10], id="joined up to a piece"),
    pytest.param([10, 3 * PIECE + 1, 10], [10, PIECE, PIECE, PIECE, 1, 10], id="a large frame sliced"),
])
def test_frames_go_in_pieces_of_bounded_size(sizes: list[int], pieces: list[int]) -> None:
    frames = [bytes([65 + n]) * size for n, size in enumerate(sizes)]
    sent = list(_pieces_of(frames))
    assert [len(piece) for piece in sent] == pieces
    assert b"".join(bytes(piece) for piece in sent) == b"".join(frames)


# --- reading requests ----------------------------------------------------------------------------


@pytest.mark.parametrize("sent", [
    pytest.param([], id="nothing"),
    pytest.param([b"GET /healthz HTTP/1.1\r\n", b"Host: x\r\n", *(f"X-{n}: {n}\r\n".encode() for n in range(20))],
                 id="a header at a time"),
])
def test_headers_that_do_not_come_in_time_end_their_connection(sent: list[bytes]) -> None:
    """Every 0.2 s a little more, never done (or nothing): closed, unanswered, once the header limit has passed."""
    with _served(create_app(ObjectService(Store()))) as url:
        sock = _connect(url)
        try:
            closed_after = seconds_until_closed(sock, [*sent, *[b""] * 20][:20], every=0.2)
        finally:
            sock.close()
    assert closed_after is not None and 0.4 < closed_after < 1.5, closed_after


def test_a_kept_alive_connection_waits_for_its_next_request_as_long_as_keep_alive() -> None:
    """The header limit runs from a request's first byte: between two requests uvicorn's keep-alive applies."""
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with _served(create_app(ObjectService(Store()))) as url:
        sock = _connect(url)
        try:
            sock.settimeout(5)
            sock.sendall(request)
            first = sock.recv(4096)
            time.sleep(1.0)
            sock.sendall(request)
            second = sock.recv(4096)
        finally:
            sock.close()
    assert first.startswith(b"HTTP/1.1 200 ") and second.startswith(b"HTTP/1.1 200 ")


def test_a_body_that_stops_is_answered_408_and_one_that_keeps_coming_is_read() -> None:
    obj = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slow"}}).encode()
    head = (f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(obj)}\r\n\r\n").encode()
    with _served(create_app(ObjectService(Store()))) as url:
        stopped = _connect(url)
        try:
            stopped.sendall(head + obj[:10])
            started = time.monotonic()
            answer, closed = _read_to_end(stopped, 5)
            took = time.monotonic() - started
        finally:
            stopped.close()
        steady = _connect(url)
        try:
            steady.sendall(head)
            for at in range(0, len(obj), len(obj) // 5 + 1):  # a piece every 0.2 s: never idle for the limit
                time.sleep(0.2)
                steady.sendall(obj[at:at + len(obj) // 5 + 1])
            steady.settimeout(5)
            created = steady.recv(1 << 16)
        finally:
            steady.close()
    assert closed and answer.startswith(b"HTTP/1.1 408 ") and took < 2.0
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["reason"] == "Timeout"
    assert created.startswith(b"HTTP/1.1 201 ")


def test_headers_past_their_limit_are_answered_431() -> None:
    with _served(create_app(ObjectService(Store()))) as url:
        sock = _connect(url)
        try:
            with contextlib.suppress(OSError):
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Filler: " + b"f" * 100_000 + b"\r\n")
            answer, closed = _read_to_end(sock, 5)
        finally:
            sock.close()
    assert closed and answer.startswith(b"HTTP/1.1 431 ")


def test_long_answers_outlive_the_request_limits() -> None:
    """A watch, open past the header and body limits, still gets what is committed."""
    store = Store()
    with _served(create_app(ObjectService(store))) as url:
        got: list[str] = []
        follower = threading.Thread(target=_follow, args=(url, str(store.current_rv()), "late", got))
        follower.start()
        time.sleep(1.5)
        _config_map(store, "late")
        follower.join(20)
    assert got == ["late"]


def test_a_websocket_outlives_the_request_limits() -> None:
    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                await websocket.send_text(await websocket.receive_text())

    app = Starlette(routes=[WebSocketRoute("/echo", echo)])
    with _served(app) as url:
        sock = _connect(url)
        ws = WSConnection(ConnectionType.CLIENT)
        try:
            sock.sendall(ws.send(WsRequest(host="x", target="/echo")))
            sock.settimeout(5)
            ws.receive_data(sock.recv(4096))
            assert any(isinstance(event, AcceptConnection) for event in ws.events())
            time.sleep(1.5)  # past the header and body limits
            sock.sendall(ws.send(TextMessage(data="still here")))
            ws.receive_data(sock.recv(4096))
            assert [event.data for event in ws.events() if isinstance(event, TextMessage)] == ["still here"]
            sock.sendall(ws.send(CloseConnection(code=1000)))
        finally:
            sock.close()


def test_the_servers_run_flexqs_protocol() -> None:
    """The API's servers (one on each socket) read requests with the bounded protocol, under the server's limits."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        ((server, _),) = uvicorn_servers(create_app(ObjectService(Store())), [sock], None, "warning")
    assert server.config.http is bounded_protocol()
    assert bounded_protocol().LIMITS == LIMITS == Limits(header_seconds=10.0, header_bytes=1 << 20,
                                                         body_idle_seconds=30.0, write_stall_seconds=60.0)
