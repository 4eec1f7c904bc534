"""flexq's CLI knows it is talking to its server: it sends its token to the server of FLEXQ_HOME through that
server's Unix socket (``FLEXQ_HOME/run/api.sock``), never in clear to whatever holds a loopback port; the socket
answers the server's own user and root only."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from flexq.client import CliError, Route, route
from flexq.config import listen_record, local_socket
from flexq.server.tls import ensure_certificates
from tests import forks
from tests.conftest import Server, free_port, free_port_pair, start_server, stop_server
from tests.support.sockets import listening

TOKEN = "flexq-test-token"


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_a_program_on_the_port_after_the_server_is_gone_gets_no_token(tmp_path: Path, how: str) -> None:
    srv = start_server(tmp_path / "home", port=free_port_pair())
    port = int(srv.url.rsplit(":", 1)[1])
    token = srv.token
    assert srv.cli("get", "pods").code == 0
    if how == "killed":  # its socket and record stay behind; nothing answers on the socket
        srv.process.send_signal(signal.SIGKILL)
        srv.process.wait(timeout=30)
        assert local_socket(srv.home).exists()
    stop_server(srv)
    if how == "stopped":
        assert not local_socket(srv.home).parent.exists(), "a stopping server removes its socket's folder"
    with listening(port) as taker:
        answer = srv.cli("get", "pods")
    assert answer.code == 1 and "cannot reach the flexq server" in answer.err, answer
    assert token.encode() not in taker.received and b"Bearer" not in taker.received
    assert taker.connections == 0


def test_a_plain_http_server_that_is_not_the_homes_gets_no_token(server: Server) -> None:
    """``--server http://...`` naming another port than the home's server's: refused in one line, unless asked."""
    with listening(free_port()) as taker:
        url = f"http://127.0.0.1:{taker.sock.getsockname()[1]}"
        refused = server.cli("--server", url, "get", "pods")
        assert refused.code == 1 and len(refused.err.strip().splitlines()) == 1, refused
        assert "refusing to send a token over plain HTTP" in refused.err and "FLEXQ_INSECURE_HTTP=1" in refused.err
        assert taker.connections == 0 and not taker.received
        forks.run(["--server", url, "get", "pods"], text=True, env=server.env(FLEXQ_INSECURE_HTTP="1"), timeout=60)
        assert f"Bearer {server.token}".encode() in taker.received, "FLEXQ_INSECURE_HTTP=1 sends it, as asked"
    assert server.cli("get", "pods").code == 0, "the home's own server, through its socket"


def test_a_deep_home_is_served_through_its_folder(tmp_path: Path) -> None:
    """A socket's address holds 107 bytes: a deeper FLEXQ_HOME is reached through a descriptor of its folder."""
    deep = tmp_path.joinpath(*["a-folder-with-a-long-name"] * 5, "home")
    assert len(os.fsencode(local_socket(deep))) > 107
    srv = start_server(deep, "--workers", "0")  # API workers' own sockets in FLEXQ_HOME are not this test's
    try:
        assert local_socket(deep).exists()
        listed = srv.cli("get", "clusterqueues")
        assert listed.code == 0, listed
    finally:
        stop_server(srv)


_NOBODY = 65534


def _request_as(uid: int, path: Path, token: str) -> bytes:
    """What a process of user ``uid`` reads back for a request sent to the socket at ``path`` (forked: the test
    process keeps its user)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only the standard library, then out
        answer = b""
        try:
            os.close(read)
            if uid != os.getuid():
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(10)
                conn.connect(str(path))
                conn.sendall(f"GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             f"Authorization: Bearer {token}\r\nConnection: close\r\n\r\n".encode())
                while chunk := conn.recv(65536):
                    answer += chunk
        except OSError as exc:
            answer = f"error: {exc}".encode()
        finally:
            os.write(write, answer[:4096])
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as out:
        said = out.read()
    os.waitpid(pid, 0)
    return said


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a client as another user (nobody): needs root")
def test_the_socket_refuses_a_peer_of_another_user() -> None:
    """The folder's mode keeps other users away from the socket; with it opened up, the server still refuses a
    peer of another user by its credentials."""
    base = Path(tempfile.mkdtemp(prefix="flexq-peer-", dir="/tmp"))
    try:
        srv = start_server(base / "home")
        try:
            path = local_socket(srv.home)
            assert _request_as(0, path, srv.token).startswith(b"HTTP/1.1 200"), "the server's own user (root)"
            for folder in (base, srv.home, path.parent):  # the first wall down, to test the second
                folder.chmod(0o711)
            path.chmod(0o666)
            said = _request_as(_NOBODY, path, srv.token)
            assert said.startswith(b"HTTP/1.1 403") and b"own user and root only" in said, said
        finally:
            stop_server(srv)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --- which way the CLI takes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    server: str
    record: dict[str, object] | None = None
    token: bool = True
    insecure: bool = False
    folder_mode: int = 0o700
    expect: str = ""
    """``socket``, ``plain``, ``https <url>``, or the start of the refusal's message."""


CASES = [
    Case("the home's port: its socket", "http://127.0.0.1:8585", {"http_port": 8585, "socket": True}, expect="socket"),
    Case("localhost names it too", "http://localhost:8585/", {"http_port": 8585, "socket": True}, expect="socket"),
    Case("another port: refused", "http://127.0.0.1:9000", {"http_port": 8585, "socket": True},
         expect="refusing to send a token over plain HTTP to http://127.0.0.1:9000: it is not the server"),
    Case("no server of the home: refused", "http://127.0.0.1:8585", None,
         expect="cannot reach the flexq server at http://127.0.0.1:8585: no server of FLEXQ_HOME"),
    Case("another machine: refused", "http://10.0.0.1:8585", {"http_port": 8585, "socket": True},
         expect="refusing to send a token over plain HTTP to http://10.0.0.1:8585: it would cross the network"),
    Case("no token: nothing to keep", "http://127.0.0.1:9000", None, token=False, expect="plain"),
    Case("asked for", "http://127.0.0.1:9000", None, insecure=True, expect="plain"),
    Case("a folder others may write to", "http://127.0.0.1:8585", {"http_port": 8585, "socket": True},
         folder_mode=0o777, expect="cannot reach the flexq server"),
    Case("no socket: its HTTPS port, its CA", "http://127.0.0.1:8585",
         {"http_port": 8585, "socket": False, "https": "https://127.0.0.1:8586"}, expect="https https://127.0.0.1:8586"),
    Case("HTTPS as asked", "https://127.0.0.1:8586", None, expect="https https://127.0.0.1:8586"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_way_to_a_server(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    ensure_certificates(home, ["127.0.0.1"])
    if case.record is not None:
        listen_record(home).parent.mkdir(mode=0o700)
        listen_record(home).write_text(json.dumps(case.record))
        local_socket(home).parent.chmod(case.folder_mode)
    monkeypatch.setenv("FLEXQ_HOME", str(home))
    monkeypatch.delenv("FLEXQ_CA", raising=False)
    monkeypatch.delenv("FLEXQ_INSECURE_HTTP", raising=False)
    if case.token:
        monkeypatch.setenv("FLEXQ_TOKEN", TOKEN)
    else:
        monkeypatch.delenv("FLEXQ_TOKEN", raising=False)
        monkeypatch.setenv("FLEXQ_HOME", str(tmp_path / "elsewhere"))  # no administrator's token to read
    if case.insecure:
        monkeypatch.setenv("FLEXQ_INSECURE_HTTP", "1")
    try:
        way = route(case.server)
    except CliError as exc:
        assert exc.message.startswith(case.expect), exc.message
        assert TOKEN not in exc.message
        return
    assert _described(way) == case.expect
    assert way.headers == ({"Authorization": f"Bearer {TOKEN}"} if case.token else {})


def _described(way: Route) -> str:
    if way.socket is not None:
        assert way.socket == str(local_socket(Path(os.environ["FLEXQ_HOME"])))
        return "socket"
    if way.url.startswith("https://"):
        assert isinstance(way.verify, ssl.SSLContext)
        return f"https {way.url}"
    return "plain"

