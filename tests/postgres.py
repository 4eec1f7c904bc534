"""A real PostgreSQL server for the tests: Debian's binaries, a cluster in a temporary folder, a free port.

As root, PostgreSQL refuses to run: the cluster then belongs to the ``postgres`` user (Debian's package makes
it) or ``nobody``, and the binaries run through ``runuser``. Where no binaries are found, :func:`start` says why
and the tests that need a database are skipped with that reason (``make test`` on a machine where ``.ci/run``
could install Debian's ``postgresql`` runs them).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.conftest import free_port

USER = "flexq"


@dataclass
class Postgres:
    root: Path
    port: int
    bin: Path
    runas: list[str]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A new empty database; its URL."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def binaries() -> Path | None:
    """The folder of initdb, pg_ctl and postgres: on PATH, in /usr/local/bin, or Debian's newest."""
    found = shutil.which("pg_ctl") or shutil.which("pg_ctl", path="/usr/local/bin")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    return Path(versions[-1]).parent if versions else None


def _runas() -> tuple[list[str], int] | str:
    """The command prefix that runs the binaries as someone else than root, and their uid; or why none."""
    if os.geteuid() != 0:
        return [], os.geteuid()
    runuser = shutil.which("runuser")
    if runuser is None:
        return "running as root, and runuser (to run PostgreSQL as another user) is not installed"
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return [runuser, "-u", name, "--"], pwd.getpwnam(name).pw_uid
    return "running as root, and there is no postgres or nobody user to run PostgreSQL as"


def start() -> Postgres | str:
    """A running server (stop it with :func:`stop`), or why there is none."""
    folder = binaries()
    if folder is None:
        return "PostgreSQL's binaries (initdb, pg_ctl) are not installed (Debian: apt-get install postgresql)"
    runas = _runas()
    if isinstance(runas, str):
        return runas
    prefix, uid = runas
    root = Path(tempfile.mkdtemp(prefix="flexq-pg-"))
    os.chown(root, uid, -1)
    port = free_port()
    server = Postgres(root, port, folder, prefix)
    options = (f"-k {root} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
               "-c full_page_writes=off -c max_connections=200")
    steps = [[str(folder / "initdb"), "-D", str(root / "data"), "-U", USER, "--auth=trust", "-E", "UTF8",
              "--locale=C", "--no-sync"],
             [str(folder / "pg_ctl"), "-D", str(root / "data"), "-o", options, "-l", str(root / "log"), "-w",
              "-t", "30", "start"]]
    for step in steps:
        done = subprocess.run([*prefix, *step], capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            stop(server)
            return f"PostgreSQL did not start ({Path(step[0]).name}): {(done.stderr or done.stdout).strip()[-300:]}"
    return server


def stop(server: Postgres) -> None:
    if (server.root / "data" / "postmaster.pid").exists():
        subprocess.run([*server.runas, str(server.bin / "pg_ctl"), "-D", str(server.root / "data"), "-m",
                        "immediate", "-w", "stop"], capture_output=True, timeout=60, check=False)
    shutil.rmtree(server.root, ignore_errors=True)
