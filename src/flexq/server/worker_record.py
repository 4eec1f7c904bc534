"""Which API worker processes a server runs, written under its ``FLEXQ_HOME``, so that the next server of that home
can wait for the workers of one that was killed.

A killed owner takes its workers with it (the kernel signals them), but not at once: a worker on a busy machine
may still hold the ports for a moment, and a server started again at once would fail to bind them ("Address already
in use"). The record names the owner and its workers by pid and start time (a pid alone may have been reused); a
server starting on that home waits for the workers of an owner that is gone, and ends those that outlive the wait.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

__all__ = ["LEFTOVER_WAIT", "Process", "await_leftovers", "forget", "identify", "record", "record_path"]

log = logging.getLogger("flexq.server")

LEFTOVER_WAIT: Final = 5.0
"""Seconds a starting server waits for the last owner's workers to end by themselves before it kills them."""

Process = tuple[int, int]
"""A process as the record names it: its pid and its start time (in clock ticks since boot; 0 where unknown)."""


def record_path(home: Path) -> Path:
    return home / "workers.json"


def started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot; 0 where the system does not say), or None if there is no
    such process (or only its exit status is left: a zombie holds no ports)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return _exists(pid)
    # The command name (field 2) is in parentheses and may hold spaces; the start time is field 22.
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _exists(pid: int) -> int | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return 0
    return 0


def identify(pid: int) -> Process:
    return pid, started(pid) or 0


def alive(process: Process) -> bool:
    now = started(process[0])
    return now is not None and (now == process[1] or 0 in (now, process[1]))


def record(home: Path, owner: Process, workers: Iterable[Process]) -> None:
    """Write (atomically) that ``owner`` runs ``workers`` on ``home``."""
    path = record_path(home)
    text = json.dumps({"owner": list(owner), "workers": [list(w) for w in workers]})
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    temporary.replace(path)


def forget(home: Path) -> None:
    """The owner stopped its workers itself: nothing to wait for."""
    with contextlib.suppress(FileNotFoundError):
        record_path(home).unlink()


def _read(home: Path) -> tuple[Process, list[Process]] | None:
    try:
        data = json.loads(record_path(home).read_text())
        owner = (int(data["owner"][0]), int(data["owner"][1]))
        return owner, [(int(w[0]), int(w[1])) for w in data["workers"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        log.warning("%s does not read: its workers are not waited for", record_path(home))
        return None


def await_leftovers(home: Path, wait: float = LEFTOVER_WAIT) -> bool:
    """Wait (up to ``wait`` seconds) for the API workers of this home's last server, if that server is gone and they
    are not yet, then kill those still there. Returns whether that server was gone without stopping its workers
    (killed): a process it forked a moment before it died (a forecast) may hold its ports a moment longer. An owner
    that still runs is left alone (another server of this home: its ports will say so)."""
    found = _read(home)
    if found is None:
        return False
    owner, workers = found
    if alive(owner) and owner[0] != os.getpid():
        return False
    left = [w for w in workers if alive(w)]
    running = _still_running(left, wait)
    for pid, _ in running:
        log.warning("API worker %d of the last server on %s still runs after %.0f s: killing it", pid, home, wait)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    _still_running(running, wait)
    forget(home)
    return True


def _still_running(processes: list[Process], wait: float) -> list[Process]:
    """Those of ``processes`` still running after up to ``wait`` seconds (it returns once none is)."""
    deadline = time.monotonic() + wait
    while processes and time.monotonic() < deadline:
        time.sleep(0.02)
        processes = [p for p in processes if alive(p)]
    return processes
