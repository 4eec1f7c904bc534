"""Counting the Ray processes a test started, whoever their parent is now (a killed server's clusters are adopted
by init), and failing the test if any outlives it.

Processes are told apart by a tag in their environment (``RAY_LEAKS_TEST_TAG``, inherited from the test through the
server by every process of the clusters it starts: not a ``FLEXQ_`` variable, which jobs do not inherit) together
with a cluster's temp dir (``TMPDIR=/tmp/fqr-...`` or ``/tmp/fqw-...``); some of Ray's processes overwrite their
environment with their title, so the sessions of the tagged ones are followed too. Other tests' clusters on the same
machine are never counted, nor touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TAG_VAR = "RAY_LEAKS_TEST_TAG"


@dataclass
class RayProcesses:
    tag: str
    sessions: set[int] = field(default_factory=set)
    """Sessions seen holding a tagged cluster process."""
    temp_dirs: set[Path] = field(default_factory=set)
    """The clusters' temp dirs seen."""

    def running(self) -> dict[int, str]:
        """pid -> command line of every live (not zombie) process of this test's Ray clusters."""
        tag = f"{TAG_VAR}={self.tag}".encode()
        found: dict[int, tuple[int, str]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
                environ = (entry / "environ").read_bytes().split(b"\0")
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if fields[0] == "Z":
                continue
            sid = int(fields[3])
            temps = [v[len(b"TMPDIR="):].decode() for v in environ if v.startswith((b"TMPDIR=/tmp/fqr-",
                                                                                   b"TMPDIR=/tmp/fqw-"))]
            if tag in environ and temps:
                self.sessions.add(sid)
                self.temp_dirs.update(Path(t) for t in temps)
            found[int(entry.name)] = (sid, command.strip())
        return {pid: command for pid, (sid, command) in found.items() if sid in self.sessions}

    def count(self) -> int:
        return len(self.running())

    def kill_all(self) -> None:
        for pid in self.running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def ray_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[RayProcesses]:
    """Tags what the test starts from now on (servers inherit the tag) and, at the end, asserts that none of the
    Ray processes it started is left (waiting a little for those stopping), killing any that are, and that their
    temp dirs are gone."""
    procs = RayProcesses(uuid.uuid4().hex)
    monkeypatch.setenv(TAG_VAR, procs.tag)
    yield procs
    deadline = time.monotonic() + 20
    left = procs.running()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = procs.running()
    procs.kill_all()
    dirs = sorted(str(d) for d in procs.temp_dirs if d.exists())
    for d in procs.temp_dirs:
        shutil.rmtree(d, ignore_errors=True)
    assert not left, f"Ray processes left behind: {left}"
    assert not dirs, f"Ray temp dirs left behind: {dirs}"


def clusters_of(server_pid: int) -> dict[int, Path]:
    """The Ray clusters a server started: their process sessions and temp dirs (from ``ray start``'s command)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if int(stat[1]) == server_pid and "start" in argv and any(a.endswith("ray.scripts.scripts") for a in argv):
            temp = next(a.removeprefix("--temp-dir=") for a in argv if a.startswith("--temp-dir="))
            found[int(entry.name)] = Path(temp)
    return found
