"""A local Ray cluster for one job: started in its own session, stopped by killing exactly that session.

``ray stop`` would kill every Ray process on the host (other jobs', other tests'), so each cluster is
started as ``ray start --head --block`` in a new process session and stopped by signalling that session
(SIGTERM, then SIGKILL after a grace period), then its temporary directory is removed. Every port is
chosen free on the loopback interface (the GCS and client ports outside Ray's worker port range), the
node address is 127.0.0.1 (no traffic leaves the machine), token auth is off, usage stats are off, and the
temp dir is short (Unix socket paths are limited to 107 bytes).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from flexq.runtime.emulation import Accelerators

__all__ = ["WORKER_LABEL", "LocalRayCluster", "RayStartError"]

WORKER_LABEL = "flexq.dev/worker"

_WORKER_PORTS = range(10002, 20000)


class RayStartError(RuntimeError):
    """The Ray cluster did not come up; the message says why."""


def _free_port(avoid: set[int]) -> int:
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port not in _WORKER_PORTS and port not in avoid:
            return port
    raise RayStartError("no free port outside Ray's worker port range")


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
    process: subprocess.Popen[bytes] | None = None
    temp_dir: Path | None = None
    dashboard_port: int = 0
    gcs_port: int = 0
    workers: dict[str, tuple[subprocess.Popen[bytes], Path]] = field(default_factory=dict)
    """Worker nodes started by :meth:`add_worker`: name -> (process, temp dir)."""
    client_port: int = 0

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def ports(self) -> dict[str, int]:
        """The cluster's ports on 127.0.0.1 by the names KubeRay gives the head's container ports; empty when
        the cluster is not running."""
        if self.process is None or self.process.poll() is not None:
            return {}
        return {"gcs-server": self.gcs_port, "dashboard": self.dashboard_port, "client": self.client_port}

    def start(self, timeout: float = 120.0) -> None:
        used: set[int] = set()
        self.gcs_port = _free_port(used)
        used.add(self.gcs_port)
        self.dashboard_port = _free_port(used)
        used.add(self.dashboard_port)
        self.client_port = client_port = _free_port(used)
        used.add(client_port)
        agent_port = _free_port(used)
        self.temp_dir = Path(tempfile.mkdtemp(prefix="fqr-", dir="/tmp"))
        env = {**os.environ, **self.accelerators.env, **self.extra_env,
               "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
               "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
               # What the cluster's processes (and the job) put in temp files goes with the cluster's temp dir:
               # a worker killed at the end leaves nothing of its own in /tmp (multiprocessing's pymp-* dirs).
               "TMPDIR": str(self.temp_dir)}
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
        log = (self.temp_dir / "ray-start.log").open("wb")
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                tail = (self.temp_dir / "ray-start.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RayStartError(f"ray start exited with code {code}: {tail.strip()}")
            try:
                if httpx.get(f"{self.dashboard_url}/api/version", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RayStartError(f"the Ray cluster did not answer on its dashboard within {timeout:.0f}s")

    def add_worker(self, name: str, num_cpus: int, resources: dict[str, float], num_gpus: int = 0,
                   env_vars: Mapping[str, str] | None = None) -> None:
        """Start a worker node that joins this cluster (an elastic worker group's replica), labelled
        ``flexq.dev/worker=<name>``, in its own process session and temp dir, its processes started with
        ``env_vars`` (not the head's emulated accelerators). Returns once it is started; it registers with the
        cluster a few seconds later."""
        if self.process is None:
            raise RayStartError("the cluster is not running")
        temp = Path(tempfile.mkdtemp(prefix="fqw-", dir="/tmp"))
        env = {**os.environ, **self.extra_env, **(env_vars or {}),
               "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
               "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "TMPDIR": str(temp)}
        command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block",
                   f"--address=127.0.0.1:{self.gcs_port}", "--node-ip-address=127.0.0.1",
                   f"--dashboard-agent-listen-port={_free_port(set())}", f"--num-cpus={num_cpus}",
                   f"--num-gpus={num_gpus}", f"--temp-dir={temp}", f"--labels={json.dumps({WORKER_LABEL: name})}"]
        if resources:
            command.append(f"--resources={json.dumps(resources)}")
        log = (temp / "ray-start.log").open("wb")
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.workers[name] = (process, temp)

    def remove_worker(self, name: str) -> None:
        """Stop one worker node (its session only) and remove its temp dir."""
        entry = self.workers.pop(name, None)
        if entry is not None:
            _kill_session(entry[0])
            shutil.rmtree(entry[1], ignore_errors=True)

    def stop(self, grace: float = 5.0) -> None:
        """Stop this cluster's processes (and only them), its workers' too; remove the temp dirs. Idempotent."""
        for name in list(self.workers):
            self.remove_worker(name)
        if self.process is not None:
            _kill_session(self.process, grace)
            self.process = None
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


def _kill_session(process: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM the process's session, SIGKILL what is left after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _session_alive(process.pid):
        time.sleep(0.2)
    # Ray puts some of its workers in process groups of their own: kill the session's every process.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    for pid in _session_members(process.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def _session_alive(sid: int) -> bool:
    return bool(_session_members(sid))


def _session_members(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 4 and fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry.name))
    return members
