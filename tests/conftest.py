"""Shared fixtures: the guide's files, a real flexq server process on a free port, a CLI runner, a PostgreSQL
server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests import admin, claims, forks

if TYPE_CHECKING:
    from tests.postgres import Postgres

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "examples" / "guide"
GUIDE_ENV = {"ONDEMAND_NODEPOOL": "on-demand-pool", "DWS_NODEPOOL": "dws-pool"}


_BYTECODE: dict[str, str] = {}
"""The PYTHONDONTWRITEBYTECODE the session lifted for the processes it starts, while it is lifted."""


def pytest_configure(config: pytest.Config) -> None:
    """Where Python is told not to write bytecode (PYTHONDONTWRITEBYTECODE), the processes the tests start (servers,
    the CLI, benchmarks: thousands) would each compile flexq's modules afresh, a fifth of a server's imports: for
    them it is lifted, so that flexq's modules are compiled once, beside their sources as Python keeps them (the
    installed packages' are compiled at install). A cache of the session's own (PYTHONPYCACHEPREFIX) would hide the
    installed packages' bytecode: jobs' Ray workers, another user who cannot read it, took twice the CPU to import
    JAX."""
    told = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if told is not None:
        _BYTECODE["told"] = told
    if os.environ.get(claims.CLAIMS) and not config.pluginmanager.is_registered(claims):
        config.pluginmanager.register(claims, "tests.claims")  # two runs sharing their files: see tests/claims.py


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files that hold tests marked ``long`` first, those with the most first, each kept whole and in its order:
    make test hands files to its workers in this order (pytest-xdist's ``--dist loadfile``), and a long file
    started last would leave the other workers idle while it ends."""
    long = Counter(item.path for item in items if item.get_closest_marker("long") is not None)
    items.sort(key=lambda item: -long[item.path])


def pytest_unconfigure(config: pytest.Config) -> None:
    forks.stop_fork_server()
    if _BYTECODE:
        os.environ["PYTHONDONTWRITEBYTECODE"] = _BYTECODE.pop("told")


def guide_text(name: str, **env: str) -> str:
    """A guide manifest with its placeholders filled as ``envsubst`` would."""
    text = (GUIDE / name).read_text()
    for key, value in {**GUIDE_ENV, **env}.items():
        text = text.replace("${" + key + "}", value)
    return text


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    url: str
    home: Path
    process: subprocess.Popen[bytes] | forks.Forked

    @property
    def token(self) -> str:
        """The administrator's token (what flexq's CLI presents)."""
        return admin.token_of(self.home)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def cli(self, *args: str, token: str | None = None, input: str | None = None) -> Result:
        """``flexq ARGS`` against this server: as the administrator (the CLI reads the token under its home), or as
        the holder of ``token``."""
        proc = forks.run(args, input=input, text=True, env=self.env(**({"FLEXQ_TOKEN": token} if token else {})),
                         timeout=60)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "FLEXQ_SERVER": self.url, "FLEXQ_HOME": str(self.home), **extra}

    def tools_env(self, home: Path) -> dict[str, str]:
        """The environment ``eval $(flexq env)`` makes, for the real gcloud and kubectl, with ``HOME`` at
        ``home`` (so nothing of the user's own configuration is read or written)."""
        exported = forks.run(["env"], text=True, env=self.env())
        assert exported.returncode == 0, exported.stderr
        exports = exported.stdout
        env = dict(self.env(), HOME=str(home))
        for line in exports.splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value
        return env


def free_port_pair() -> int:
    """A free port P with P + 1 free too: a server started as a user would (HTTPS on --port + 1)."""
    for _ in range(100):
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two free ports in a row")


def _test_workers(flags: list[str]) -> list[str]:
    """``--workers N`` where ``FLEXQ_TEST_WORKERS=N`` asks every server of a run to serve through API workers (not
    for servers that cannot: a shared or PostgreSQL store, or a given --workers)."""
    count = os.environ.get("FLEXQ_TEST_WORKERS", "")
    if not count or any(flag in flags for flag in ("--workers", "--shared", "--store")):
        return []
    return ["--workers", count]


def start_server(home: Path, *extra: str, port: int | None = None) -> Server:
    """A server process; jobs are not executed unless ``extra`` says ``--runtime ray``. With ``port`` (from
    :func:`free_port_pair`), HTTPS is left at its default (``port`` + 1); else it takes any free port."""
    flags = list(extra) if "--runtime" in extra else ["--runtime", "none", *extra]
    if port is None and "--tls-port" not in flags and "--no-tls" not in flags:
        flags += ["--tls-port", "0"]
    flags += _test_workers(flags)
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    process = forks.popen(["server", "--port", str(port), "--home", str(home), *flags],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60  # both test runs, and their Ray clusters, may be loading the machine
    while time.monotonic() < deadline:
        if process.poll() is not None:
            said = b""
            if process.stderr is not None:
                said = process.stderr.read()
                process.stderr.close()
            raise RuntimeError(f"server exited: {said.decode()}")
        try:
            if admin.get(f"{url}/healthz", timeout=1).status_code == 200:
                admin.register(url, home)
                return Server(url, home, process)
        except httpx.HTTPError:
            time.sleep(0.1)
    stop_server(Server(url, home, process))
    raise RuntimeError("server did not start")


def stop_server(server: Server) -> None:
    admin.unregister(server.url)
    server.process.terminate()
    try:
        server.process.wait(timeout=30)  # a server on Ray stops its clusters first
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    if server.process.stderr:
        server.process.stderr.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A fresh flexq server process with its own state directory."""
    srv = start_server(tmp_path / "home")
    try:
        yield srv
    finally:
        stop_server(srv)


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for a whole module, for tests that cannot see each other's objects (names of their own, or nothing
    written): a module overrides ``server`` with it, and its ``flexq`` and ``kubectl`` then reach this one. A server's
    start is most of what a short CLI test costs."""
    srv = start_server(tmp_path_factory.mktemp("server") / "home")
    try:
        yield srv
    finally:
        stop_server(srv)


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def flexq(server: Server, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run the real ``flexq`` command against ``server``: ``flexq("get", "cq", input=...)``."""

    def run(*args: str, input: str | bytes | None = None, cwd: Path | None = None) -> Result:
        proc = forks.run(args, input=input, env=server.env(), cwd=cwd or tmp_path, timeout=60)
        return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    return run


@pytest.fixture
def kubectl(server: Server, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run the real ``kubectl`` against ``server`` (skipped where kubectl is not installed)."""
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed")
    config = tmp_path / "kubeconfig"
    written = forks.run(["kubeconfig", "--write", str(config)], env=server.env())
    assert written.returncode == 0, written.stderr

    def run(*args: str, input: str | None = None) -> Result:
        proc = subprocess.run(
            [binary, *args], input=input.encode() if input else None, capture_output=True,
            env={**server.env(), "KUBECONFIG": str(config), "HOME": str(tmp_path)}, cwd=tmp_path, timeout=60,
            check=False,
        )
        return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    return run


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A PostgreSQL server for the session (skipped, with the reason, where none can run)."""
    try:
        from tests import postgres as pg
    except ImportError as exc:
        pytest.skip(f"psycopg is not installed ({exc}): pip install -e '.[dev]'")
    started = pg.start()
    if isinstance(started, str):
        pytest.skip(started)
    try:
        yield started
    finally:
        pg.stop(started)


@pytest.fixture
def postgres_url(postgres: Postgres) -> Iterator[str]:
    """A new empty database on the session's PostgreSQL server, dropped afterwards."""
    url = postgres.new_database()
    try:
        yield url
    finally:
        postgres.drop_database(url)
