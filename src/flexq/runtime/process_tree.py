"""A job's processes as one tree the server owns: started in a cgroup of their own, ended all together.

A process session is no boundary: a job's child that calls ``setsid`` (or double-forks) leaves its pod's session, and
killing the session misses it. So each run (a pod's container, a Ray cluster) is started in a cgroup of its own, made
beneath the server's own cgroup in the cgroup v2 hierarchy (``/sys/fs/cgroup`` or a hybrid machine's
``/sys/fs/cgroup/unified``). No process can leave its cgroup without write access to the cgroups above it, which are
root's: whatever the job forks stays in, and :meth:`ProcessTree.kill` ends every one of them (``cgroup.kill``, or a
SIGKILL to each member where the kernel has no ``cgroup.kill``). Where the machine's cgroup v1 ``memory`` and ``pids``
hierarchies can be written, the run's processes join cgroups there too, with the limits asked
(``memory.limit_in_bytes``, ``pids.max``); on a pure v2 machine the same limits go to ``memory.max`` and ``pids.max``
where those controllers are delegated.

A run is started through a launcher (a few lines of Python run as root, before any of the job's code): it joins the
cgroups, forks, and the child drops to the job's user (its groups too) and runs the command; the launcher waits for
it and writes its exit code (128 + N for signal N, as Kubernetes reports a container killed by a signal) to a status
file in a folder of the server's own. A server killed meanwhile leaves the launcher running: the next server finds
the tree again from its record (the cgroup's path and the launcher's pid), follows it to its end and reads the exit
code from the status file, so a run is never started twice nor lost.

Where no cgroup can be made (a container whose cgroup file system is read-only), runs are started in a session of
their own as before (``contained`` False) and the server says so at its start.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

__all__ = ["LAUNCHER", "Limits", "ProcessTree", "cgroup_root", "exit_status", "pid_alive"]

_GROUP: Final = "flexq-runs"
"""The cgroup, beneath the server's own, that holds every run's cgroup."""

LAUNCHER: Final = r"""
import os, signal, sys, warnings  # warnings: what os.execvp imports, loaded before the user changes
procs, uid, gid, groups, status, argv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], \
    sys.argv[6:]
for path in filter(None, procs.split("\n")):
    with open(path, "w") as fh:
        fh.write("0")
child = os.fork()
if child == 0:
    try:
        if uid >= 0:
            os.setgroups([int(g) for g in filter(None, groups.split(","))])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"flexq: the container could not start: {exc}\n")
        sys.stderr.flush()
        os._exit(127)
def forward(sig, _frame):
    try:
        os.kill(child, sig)
    except ProcessLookupError:
        pass
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, forward)
while True:
    try:
        _, st = os.waitpid(child, 0)
        break
    except InterruptedError:
        continue
code = os.waitstatus_to_exitcode(st)
code = code if code >= 0 else 128 - code
if status:
    with open(status + ".partial", "w") as fh:
        fh.write(str(code))
    os.replace(status + ".partial", status)
os._exit(code)
"""
"""The launcher (see the module's text): run as ``python -I -S -c LAUNCHER PROCS UID GID GROUPS STATUS ARGV...``."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What a run may take: ``memory`` in bytes and ``pids`` (tasks, threads included); None: no limit."""

    memory: int | None = None
    pids: int | None = None


def _mounts() -> dict[str, Path]:
    """cgroup hierarchy -> its mount point: ``"2"`` for the v2 one, else the v1 controller's name."""
    found: dict[str, Path] = {}
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or not tail:
                continue
            point = Path(fields[4].replace("\\040", " "))
            if tail[0] == "cgroup2":
                found.setdefault("2", point)
            elif tail[0] == "cgroup" and len(tail) >= 3:
                for option in tail[2].split(","):
                    if option in ("memory", "pids"):
                        found.setdefault(option, point)
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup in each hierarchy: ``"2"`` and the v1 controllers, as ``/proc/self/cgroup`` says."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as fh:
        for line in fh:
            number, controllers, path = line.rstrip("\n").split(":", 2)
            if number == "0" and controllers == "":
                out["2"] = path
            for controller in controllers.split(","):
                if controller in ("memory", "pids"):
                    out[controller] = path
    return out


_ROOTS: dict[str, Path] | None = None


def cgroup_root() -> dict[str, Path]:
    """The folders the runs' cgroups are made in, by hierarchy (``"2"``, ``"memory"``, ``"pids"``): ``flexq-runs``
    beneath this process's own cgroup in each hierarchy that lets it be made. Empty where the v2 one cannot be (no
    run is then contained). Worked out once."""
    global _ROOTS
    if _ROOTS is not None:
        return _ROOTS
    mounts, own = _mounts(), _own_paths()
    roots: dict[str, Path] = {}
    for hierarchy in ("2", "memory", "pids"):
        if hierarchy not in mounts or hierarchy not in own:
            continue
        folder = mounts[hierarchy] / own[hierarchy].lstrip("/") / _GROUP
        try:
            folder.mkdir(exist_ok=True)
            if hierarchy == "2":
                (folder / "cgroup.procs").stat()
        except OSError:
            continue
        roots[hierarchy] = folder
    if "2" not in roots:
        roots = {}
    _ROOTS = roots
    return roots


def exit_status(path: Path) -> int | None:
    """The exit code a launcher wrote at ``path``, or None where it has not (yet)."""
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _members(folder: Path) -> list[int]:
    """The processes in the cgroup ``folder`` and the cgroups beneath it."""
    pids: set[int] = set()
    for procs in _walk(folder, "cgroup.procs"):
        with contextlib.suppress(OSError):
            pids.update(int(p) for p in procs.read_text(encoding="ascii").split())
    return sorted(pids)


def _walk(folder: Path, name: str = "") -> list[Path]:
    """``folder`` and the cgroups beneath it, deepest first (with ``name``: that file in each); none once the tree is
    gone, even where another thread removes it while it is walked."""
    found: list[Path] = []
    try:
        for root, _dirs, _files in os.walk(folder):
            found.append(Path(root))
    except OSError:
        pass
    found.sort(key=lambda p: -len(p.parts))
    return [p / name for p in found] if name else found


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    return False


@dataclass
class ProcessTree:
    """One run's cgroups (by hierarchy; empty: the run is not contained) and the launchers started in them."""

    name: str
    groups: dict[str, Path] = field(default_factory=dict)
    launchers: list[int] = field(default_factory=list)
    """The pids of the launchers started in this tree (this server's children, or a former server's)."""

    @classmethod
    def create(cls, label: str, limits: Limits = Limits()) -> ProcessTree:
        """A new tree: its cgroups made where the machine allows, with ``limits`` where the controllers let them
        be set (a limit that cannot be set is left unset)."""
        name = f"{label[:40]}-{uuid.uuid4().hex[:12]}"
        groups: dict[str, Path] = {}
        for hierarchy, root in cgroup_root().items():
            folder = root / name
            try:
                folder.mkdir()
            except OSError:
                if hierarchy == "2":
                    return cls(name)
                continue
            groups[hierarchy] = folder
        tree = cls(name, groups)
        tree._limit(limits)
        return tree

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ProcessTree:
        return cls(str(record.get("name", "")), {str(k): Path(str(v)) for k, v in dict(record.get("groups") or
                                                                                     {}).items()},
                   [int(p) for p in record.get("launchers") or []])

    def to_record(self) -> dict[str, Any]:
        return {"name": self.name, "groups": {k: str(v) for k, v in self.groups.items()}, "launchers": self.launchers}

    @property
    def contained(self) -> bool:
        return "2" in self.groups

    def _limit(self, limits: Limits) -> None:
        writes: list[tuple[str, str, int]] = []
        if limits.memory is not None:
            writes += [("2", "memory.max", limits.memory), ("memory", "memory.limit_in_bytes", limits.memory)]
        if limits.pids is not None:
            writes += [("2", "pids.max", limits.pids), ("pids", "pids.max", limits.pids)]
        for hierarchy, knob, value in writes:
            folder = self.groups.get(hierarchy)
            if folder is not None:
                with contextlib.suppress(OSError):
                    (folder / knob).write_text(str(value), encoding="ascii")

    def spawn(self, argv: Sequence[str], *, cwd: Path | None, env: Mapping[str, str], stdout: IO[bytes] | int,
              user: tuple[int, int, Sequence[int]] | None, status: Path | None) -> subprocess.Popen[bytes]:
        """Start ``argv`` in this tree as ``user`` (uid, gid, groups; None: the server's own), its output to
        ``stdout``, its exit code to ``status`` (a file of the server's). The launcher runs in a session of its own
        (signals to the server's group do not reach it)."""
        procs = "\n".join(str(folder / "cgroup.procs") for folder in self.groups.values())
        uid, gid, groups = user if user is not None else (-1, -1, ())
        command = [sys.executable, "-I", "-S", "-c", LAUNCHER, procs, str(uid), str(gid),
                   ",".join(str(g) for g in groups), str(status or ""), *argv]
        process = subprocess.Popen(command, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=stdout,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        self.launchers.append(process.pid)
        return process

    def members(self) -> list[int]:
        """Every process of the tree now (contained trees: the cgroup's; others: the launchers' sessions)."""
        if self.contained:
            return _members(self.groups["2"])
        return [pid for pid in self._session_members() if pid_alive(pid)]

    def _session_members(self) -> list[int]:
        sessions = set(self.launchers)
        found: list[int] = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    if int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[3]) in sessions:
                        found.append(int(entry.name))
        return found

    def running(self) -> bool:
        """Whether any process of the tree still runs."""
        return any(pid_alive(pid) for pid in self.members())

    def signal(self, sig: int) -> None:
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def kill(self, grace: float = 2.0) -> None:
        """SIGTERM every process of the tree, SIGKILL what is left after ``grace`` seconds (all at once where the
        kernel has ``cgroup.kill``), and wait until none is left (10 s at most)."""
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        end = time.monotonic() + 10.0
        while self.running() and time.monotonic() < end:
            killed = False
            if self.contained:
                with contextlib.suppress(OSError):
                    (self.groups["2"] / "cgroup.kill").write_text("1", encoding="ascii")
                    killed = True
            if not killed:
                self.signal(signal.SIGKILL)
            time.sleep(0.05)

    def remove(self, wait: float = 3.0) -> None:
        """Remove the tree's cgroups once its processes are gone: a cgroup still holds a killed process until that
        process is reaped (by its parent, or by init once its parent is gone), so an empty-looking cgroup that is
        still busy is tried again for up to ``wait`` seconds, and left if it is still busy then."""
        deadline = time.monotonic() + wait
        for folder in self.groups.values():
            for inner in _walk(folder):
                if inner != folder:
                    with contextlib.suppress(OSError):
                        inner.rmdir()
            while True:
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        raise
                    if time.monotonic() > deadline:
                        break  # still busy: left behind
                    time.sleep(0.05)
                else:
                    break
