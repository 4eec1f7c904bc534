"""A local Ray cluster for one job: started in its own session, stopped by killing exactly that session.

``ray stop`` would kill every Ray process on the host (other jobs', other tests'), so each cluster is
started as ``ray start --head --block`` in a new process session and stopped by signalling that session
(SIGTERM, then SIGKILL after a grace period), then its temporary directory is removed. Every port is
chosen free on the loopback interface (the GCS and client ports outside Ray's worker port range), the
node address is 127.0.0.1 and every process of the cluster listens there only (no port is reachable from another
machine: Ray has no authentication of its own), token auth is off, usage stats are off, and the
temp dir is short (Unix socket paths are limited to 107 bytes).

Its processes outlive the server that started them (their sessions are their own): with ``record_path`` the
cluster keeps a record there (pids, temp dirs, ports, and what its user adds under ``record``), written as soon as
the head is started and removed once the cluster is stopped, from which a later server finds it again
(:meth:`LocalRayCluster.from_record`; :mod:`flexq.runtime.reattach`). Every process the cluster starts carries
its temp dir in its environment (``TMPDIR``): stopping it kills its sessions and whatever else carries that mark
(the job's driver runs in a session of its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Protocol

import httpx

from flexq.errors import FlexqError
from flexq.runtime.beneath import open_beneath, read_beneath
from flexq.runtime.emulation import Accelerators
from flexq.runtime.job_user import JobUser, job_environment, job_user
from flexq.runtime.process_tree import Limits, ProcessTree

__all__ = ["WORKER_LABEL", "Detached", "LocalRayCluster", "RayClusterHandle", "RayStartError", "SessionProcess"]

WORKER_LABEL = "flexq.dev/worker"

_WORKER_PORTS = range(10002, 20000)
_CLUSTER_PIDS: Final = 32768
"""The tasks (threads included) a cluster's processes may have at once, where the machine lets it be set: Ray's
processes run hundreds of threads each."""


class RayStartError(FlexqError, RuntimeError):
    """The Ray cluster did not come up; the message says why."""


class SessionProcess(Protocol):
    """The leader of a cluster's (or worker node's) process session: a child of this server, or not."""

    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class RayClusterHandle(Protocol):
    """A Ray cluster a job runs on: a :class:`LocalRayCluster`, or an existing cluster known by its dashboard
    (:class:`~flexq.runtime.remote.RemoteRayCluster`)."""

    @property
    def dashboard_url(self) -> str: ...

    @property
    def ports(self) -> dict[str, int]: ...

    def alive(self) -> bool: ...

    def exit_reason(self) -> str:
        """Once the cluster's head is gone: what Ray said of its processes that ended (empty when it said
        nothing)."""
        ...

    def stop(self, grace: float = 5.0) -> None: ...


class Detached:
    """A session leader this server did not start (a cluster found again after a restart), followed by its pid
    as long as that pid is still the process whose command line holds ``mark`` (its ``--temp-dir``)."""

    def __init__(self, pid: int, mark: str) -> None:
        self.pid = pid
        self.mark = mark

    def poll(self) -> int | None:
        """None while it runs; -1 once it is gone (its exit status belongs to its parent)."""
        try:
            state = (Path("/proc") / str(self.pid) / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            argv = (Path("/proc") / str(self.pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            return -1
        return None if state != "Z" and self.mark in argv else -1

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.1)
        return -1


def _loopback_only(avoid: set[int]) -> dict[str, str]:
    """The environment that keeps every port of a Ray node on the loopback interface. ``--node-ip-address=127.0.0.1``
    alone does not: ``ray start`` swaps a loopback address for the machine's own, and the GCS, the raylets, the
    agents and the workers then listen on every interface, without authentication. With Ray's switch for a
    one-machine cluster off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) the node keeps 127.0.0.1, and its gRPC and
    metrics servers bind it. The autoscaler's and the dashboard's metrics ports, fixed by default, are chosen free
    (two clusters would otherwise want the same)."""
    autoscaler = _free_port(avoid)
    dashboard = _free_port(avoid | {autoscaler})
    avoid.update((autoscaler, dashboard))
    return {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "AUTOSCALER_METRIC_PORT": str(autoscaler),
            "DASHBOARD_METRIC_PORT": str(dashboard)}


_JOIN: Final = """\
import sys
import ray._private.ray_constants as constants
import ray._private.services as services
constants.ENABLE_RAY_CLUSTER = True  # a worker node joins this machine's cluster
services.resolve_ip_for_localhost = lambda host: host  # and keeps 127.0.0.1, as the head does
from ray.scripts.scripts import main
sys.argv[0] = "ray"
main()
"""
"""``ray start`` for a worker node under :func:`_loopback_only`'s environment, which alone would refuse a second node
(Ray's one-machine switch) or, switched back on, swap 127.0.0.1 for the machine's address."""


_STOPPED_WHILE_STARTING: Final = "the Ray cluster was stopped while it started"


def _free_port(avoid: set[int]) -> int:
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port not in _WORKER_PORTS and port not in avoid:
            return port
    raise RayStartError("no free port outside Ray's worker port range")


_EXITED: Final = re.compile(r"^\s+(\S+) \[exit code=([^\]]*)\]\s*$")
"""A line of Ray's process exit log under "Some Ray subprocesses exited unexpectedly:"."""


def _ended_processes(text: str) -> list[str]:
    """The processes the last report of Ray's process exit log names, as ``NAME (exit code CODE)``."""
    report = text.rpartition("Some Ray subprocesses exited unexpectedly:")[2]
    found = [_EXITED.match(line) for line in report.splitlines()]
    return [f"{m[1]} (exit code {m[2]})" for m in found if m is not None]


def ended_note(cluster: RayClusterHandle) -> str:
    """`` (Ray's processes that ended: ...)`` where the cluster's head is gone and Ray said why (empty otherwise),
    to follow what a job's or a RayCluster's status says of the lost head."""
    ended = cluster.exit_reason()
    return f" (Ray's processes that ended: {ended})" if ended else ""


_MONITORING: Final = "Running subprocesses are monitored"
"""What ``ray start --block`` prints once it watches the processes it started."""
_MONITORING_WAIT: Final = 10.0
"""How long a head whose dashboard answers is given to say so (a Ray that never says it is not waited for
longer)."""


_OWNED_PARAMS = frozenset({"port", "dashboard-port", "dashboard-host", "ray-client-server-port",
                           "dashboard-agent-listen-port", "temp-dir", "node-ip-address", "block", "head",
                           "address", "disable-usage-stats"})


@dataclass
class LocalRayCluster:
    accelerators: Accelerators
    extra_env: dict[str, str] = field(default_factory=dict)
    start_params: dict[str, str] = field(default_factory=dict)
    """The head group's ``rayStartParams``: passed to ``ray start`` as ``--KEY=VALUE``, except the addresses,
    ports and directories flexq chooses (a value given for ``num-cpus`` or ``resources`` replaces flexq's)."""
    process: SessionProcess | None = None
    temp_dir: Path | None = None
    dashboard_port: int = 0
    gcs_port: int = 0
    workers: dict[str, tuple[SessionProcess, Path]] = field(default_factory=dict)
    """Worker nodes started by :meth:`add_worker`: name -> (process, temp dir)."""
    client_port: int = 0
    record_path: Path | None = None
    """Where the cluster's record is kept while it runs (None: no record)."""
    record: dict[str, Any] = field(default_factory=dict)
    """What the cluster's user keeps in the record besides the cluster's own fields."""
    _stopped: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set by :meth:`stop`: a :meth:`start` under way (in another thread) stops where it is, its processes killed."""
    tree: ProcessTree | None = None
    """The cgroup every process of the cluster runs in (see :mod:`flexq.runtime.process_tree`): a driver that calls
    ``setsid`` and drops the ``TMPDIR`` mark still ends with the cluster."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Held while the head's process is started and while the cluster stops: a stop never misses a head starting,
    and a stop called while another thread stops the cluster returns only once its processes are gone."""

    @classmethod
    def from_record(cls, record: dict[str, Any], record_path: Path | None = None) -> LocalRayCluster:
        """The cluster a record describes, its processes followed by pid (they are not this server's children)."""
        temp = Path(str(record["temp_dir"]))
        own = {"pid", "temp_dir", "gcs_port", "dashboard_port", "client_port", "workers", "tree"}
        workers: dict[str, tuple[SessionProcess, Path]] = {
            str(name): (Detached(int(pid), f"--temp-dir={path}"), Path(str(path)))
            for name, (pid, path) in dict(record.get("workers") or {}).items()}
        return cls(Accelerators(description="a Ray cluster found again"), process=Detached(
            int(record["pid"]), f"--temp-dir={temp}"), temp_dir=temp, gcs_port=int(record["gcs_port"]),
            dashboard_port=int(record["dashboard_port"]), client_port=int(record["client_port"]),
            workers=workers, record_path=record_path,
            record={k: v for k, v in record.items() if k not in own},
            tree=ProcessTree.from_record(record["tree"]) if isinstance(record.get("tree"), dict) else None)

    def save_record(self) -> None:
        """Write the record (atomically: a server killed meanwhile leaves the old one or the new one)."""
        if self.record_path is None or self.process is None or self.temp_dir is None:
            return
        body = {**self.record, "pid": self.process.pid, "temp_dir": str(self.temp_dir), "gcs_port": self.gcs_port,
                "dashboard_port": self.dashboard_port, "client_port": self.client_port,
                "workers": {name: [proc.pid, str(temp)] for name, (proc, temp) in self.workers.items()},
                **({"tree": self.tree.to_record()} if self.tree is not None else {})}
        self.record_path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.record_path.with_name(self.record_path.name + ".partial")
        partial.write_text(json.dumps(body, sort_keys=True), encoding="utf-8")
        os.replace(partial, self.record_path)

    def _process_tree(self) -> ProcessTree:
        """The cgroup the cluster's processes start in: made with the head (a cluster found again after a restart
        keeps its own; one recorded by a server that made none gets one for the workers it adds)."""
        if self.tree is None:
            self.tree = ProcessTree.create(f"ray-{self.temp_dir.name if self.temp_dir else 'cluster'}",
                                           Limits(pids=_CLUSTER_PIDS))
        return self.tree

    def _user(self) -> JobUser:
        """Who the cluster's processes run as: the user of its object's namespace."""
        namespace = self.record.get("namespace")
        return job_user(str(namespace) if namespace else None)

    def alive(self) -> bool:
        """Whether the head's ``ray start`` still runs."""
        return self.process is not None and self.process.poll() is None

    def exit_reason(self) -> str:
        """What the head's ``ray start --block`` recorded of the processes whose end ended it, e.g. ``raylet
        (exit code -9 (signal 9))``, from its process exit log (one per session); empty when there is none (a head
        stopped here, or a record already removed)."""
        if self.temp_dir is None:
            return ""
        ended: list[str] = []
        for log in sorted(self.temp_dir.glob("session_*/logs/ray_process_exit.log")):
            with contextlib.suppress(OSError):  # read without following the links the job's user may have put
                text = read_beneath(self.temp_dir, str(log.relative_to(self.temp_dir)), 1 << 20)
                ended = _ended_processes(text.decode(errors="replace")) or ended
        return ", ".join(ended)

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def ports(self) -> dict[str, int]:
        """The cluster's ports on 127.0.0.1 by the names KubeRay gives the head's container ports; empty when
        the cluster is not running."""
        if not self.alive():
            return {}
        return {"gcs-server": self.gcs_port, "dashboard": self.dashboard_port, "client": self.client_port}

    def start(self, timeout: float = 120.0, cancel: threading.Event | None = None) -> None:
        """Start the head and wait for its dashboard to answer. Refused (:class:`RayStartError`, nothing left
        running) where the head exits first, does not answer within ``timeout``, or the cluster is stopped (or
        ``cancel`` set) meanwhile."""
        used: set[int] = set()
        self.gcs_port = _free_port(used)
        used.add(self.gcs_port)
        self.dashboard_port = _free_port(used)
        used.add(self.dashboard_port)
        self.client_port = client_port = _free_port(used)
        used.add(client_port)
        agent_port = _free_port(used)
        used.add(agent_port)
        loopback = _loopback_only(used)
        self.temp_dir = temp = Path(tempfile.mkdtemp(prefix="fqr-", dir="/tmp"))
        user = self._user()
        user.give(temp)
        env = {**job_environment(os.environ), **self.accelerators.env, **self.extra_env,
               "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
               "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", **loopback,
               # What the cluster's processes (and the job) put in temp files goes with the cluster's temp dir:
               # a worker killed at the end leaves nothing of its own in /tmp (multiprocessing's pymp-* dirs).
               "TMPDIR": str(self.temp_dir), **({"HOME": str(self.temp_dir)} if user.separate else {}),
               # Its processes find this cluster, not any other on the machine: Ray's own code that looks for "the"
               # local cluster (Ray Train's placement group cleaner) fails where two clusters run at once.
               "RAY_ADDRESS": f"127.0.0.1:{self.gcs_port}"}
        command = [
            sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
            f"--port={self.gcs_port}", "--node-ip-address=127.0.0.1",
            f"--dashboard-port={self.dashboard_port}", "--dashboard-host=127.0.0.1",
            f"--ray-client-server-port={client_port}", f"--dashboard-agent-listen-port={agent_port}",
            f"--num-cpus={self.accelerators.num_cpus}", f"--num-gpus={self.accelerators.num_gpus}",
            f"--temp-dir={self.temp_dir}", "--disable-usage-stats",
        ]
        if self.accelerators.resources:
            command.append(f"--resources={json.dumps(self.accelerators.resources)}")
        for key, value in sorted(self.start_params.items()):
            if key in _OWNED_PARAMS:
                continue
            command = [c for c in command if not c.startswith(f"--{key}=")]
            command.append(f"--{key}={value}")
        with self._lock:
            if self._stopped.is_set():
                shutil.rmtree(temp, ignore_errors=True)
                self.temp_dir = None
                raise RayStartError(_STOPPED_WHILE_STARTING)
            log = _start_log(temp)
            self.process = process = self._process_tree().spawn(command, cwd=None, env=env, stdout=log,
                                                                user=user.credentials(), status=None)
            log.close()
            self.save_record()
        self._await_dashboard(process, temp, timeout, cancel)

    def _await_dashboard(self, process: SessionProcess, temp: Path, timeout: float,
                         cancel: threading.Event | None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._stopped.is_set() or (cancel is not None and cancel.is_set()):
                self.stop()
                raise RayStartError(_STOPPED_WHILE_STARTING)
            code = process.poll()
            if code is not None:
                try:
                    tail = read_beneath(temp, "ray-start.log", 2000).decode(errors="replace")
                except OSError:
                    tail = ""
                self.stop()
                raise RayStartError(f"ray start exited with code {code}: {tail.strip()}")
            try:
                if httpx.get(f"{self.dashboard_url}/api/version", timeout=2).status_code == 200:
                    self._await_monitoring(temp, min(deadline, time.monotonic() + _MONITORING_WAIT))
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RayStartError(f"the Ray cluster did not answer on its dashboard within {timeout:.0f}s")

    @staticmethod
    def _await_monitoring(temp: Path, deadline: float) -> None:
        """Wait (until ``deadline`` at most) for ``ray start --block`` to say that it watches its processes: one
        that ends before then (a raylet killed) would not end the head, and :meth:`alive` would not see it."""
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if _MONITORING in read_beneath(temp, "ray-start.log", 1 << 20).decode(errors="replace"):
                    return
            time.sleep(0.1)

    def add_worker(self, name: str, num_cpus: int, resources: dict[str, float], num_gpus: int = 0,
                   env_vars: Mapping[str, str] | None = None) -> None:
        """Start a worker node that joins this cluster (an elastic worker group's replica), labelled
        ``flexq.dev/worker=<name>``, in its own process session and temp dir, its processes started with
        ``env_vars`` (not the head's emulated accelerators). Returns once it is started; it registers with the
        cluster a few seconds later."""
        if self.process is None:
            raise RayStartError("the cluster is not running")
        temp = Path(tempfile.mkdtemp(prefix="fqw-", dir="/tmp"))
        user = self._user()
        user.give(temp)
        env = {**job_environment(os.environ), **self.extra_env, **(env_vars or {}),
               "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
               "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "TMPDIR": str(temp),
               **_loopback_only({self.gcs_port, self.dashboard_port, self.client_port}),
               **({"HOME": str(temp)} if user.separate else {}), "RAY_ADDRESS": f"127.0.0.1:{self.gcs_port}"}
        command = [sys.executable, "-c", _JOIN, "start", "--block",
                   f"--address=127.0.0.1:{self.gcs_port}", "--node-ip-address=127.0.0.1",
                   f"--dashboard-agent-listen-port={_free_port(set())}", f"--num-cpus={num_cpus}",
                   f"--num-gpus={num_gpus}", f"--temp-dir={temp}", f"--labels={json.dumps({WORKER_LABEL: name})}"]
        if resources:
            command.append(f"--resources={json.dumps(resources)}")
        log = _start_log(temp)
        process = self._process_tree().spawn(command, cwd=None, env=env, stdout=log, user=user.credentials(),
                                             status=None)
        log.close()
        self.workers[name] = (process, temp)
        self.save_record()

    def remove_worker(self, name: str) -> None:
        """Stop one worker node (its session only) and remove its temp dir."""
        entry = self.workers.pop(name, None)
        if entry is not None:
            _kill_session(entry[0], entry[1])
            shutil.rmtree(entry[1], ignore_errors=True)
            self.save_record()

    def stop(self, grace: float = 5.0) -> None:
        """Stop this cluster's processes (and only them), its workers' too; remove the temp dirs and the record.
        Idempotent; a :meth:`start` under way in another thread stops too."""
        self._stopped.set()
        with self._lock:
            for name in list(self.workers):
                self.remove_worker(name)
            if self.process is not None and self.temp_dir is not None:
                _kill_session(self.process, self.temp_dir, grace)
            self.process = None
            if self.tree is not None:  # what left the sessions and the mark: every process of the cgroup
                self.tree.kill(grace=0.5)
                self.tree.remove()
                self.tree = None
            if self.temp_dir is not None:
                shutil.rmtree(self.temp_dir, ignore_errors=True)
                self.temp_dir = None
        if self.record_path is not None:
            self.record_path.unlink(missing_ok=True)


def _start_log(temp: Path) -> IO[bytes]:
    """``ray start``'s log in a temp dir already given to the job's user: made new, beneath it, through no link (a
    program of that user could have put one there to have the server truncate what it points at)."""
    return os.fdopen(open_beneath(temp, "ray-start.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


def _kill_session(process: SessionProcess, temp: Path, grace: float = 5.0) -> None:
    """SIGTERM the process's session, SIGKILL what is left of it after ``grace`` seconds, and every process that
    carries the cluster's temp dir in its environment (the job's driver runs in a session of its own). The
    session of a process this server did not start is signalled only while that process is verified as ours."""
    mine = isinstance(process, subprocess.Popen) or process.poll() is None
    if mine:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
    for pid in _members(process.pid, temp, mine):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _members(process.pid, temp, mine):
        time.sleep(0.2)
    for _ in range(3):  # what a dying process starts on its way out goes too
        if mine:  # Ray puts some of its workers in process groups of their own: the session's every process
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        members = _members(process.pid, temp, mine)
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not members:
            break
        time.sleep(0.1)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def _members(sid: int, temp: Path, session_is_ours: bool) -> list[int]:
    """The live (not zombie) processes of the cluster: those of session ``sid`` (when it is known to be the
    cluster's: its leader is ours, or one of its processes carries the mark) and those carrying ``TMPDIR=temp``."""
    mark = f"TMPDIR={temp}".encode()
    in_session, marked = [], []
    trusted = session_is_ours
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(fields) <= 4 or fields[0] == "Z":
            continue
        carries = mark in environ
        if int(fields[3]) == sid:
            in_session.append(int(entry.name))
            trusted = trusted or carries
        elif carries:
            marked.append(int(entry.name))
    return (in_session if trusted else []) + marked
