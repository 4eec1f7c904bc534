"""A run of many jobs through a flexq server that is killed (SIGKILL) and restarted on the same state.

The pieces act as Kueue's users and its job controller would, from processes and threads of their own:

- :class:`Crashable`: the server, started again on the same ``FLEXQ_HOME``, port and flags after each kill;
- :class:`Creator`: creates the batch Jobs, retrying through the outages (a create answered ``409`` after an outage
  was made before it);
- :class:`Follower`: watches the Workloads from the last resourceVersion it saw, across restarts (a ``410`` would
  mean a gap: it is counted, and the follower lists afresh); it keeps every workload's history of admissions;
- the follower finishes each Job ``runtime`` seconds after its workload is seen admitted, by patching the Job's
  status (its ``Complete`` condition), as Kueue's performance runner does.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests import admin, forks

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/workloads"
JOBS = "/apis/batch/v1/namespaces/default/jobs"


class Crashable:
    """``flexq server`` on a fixed port and home, killed with SIGKILL and started again."""

    def __init__(self, home: Path, port: int, *flags: str) -> None:
        self.home, self.port, self.flags = home, port, flags
        self.url = f"http://127.0.0.1:{port}"
        admin.register(self.url, home)
        self.process: forks.Forked | subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 60) -> None:
        log = (self.home.parent / f"server-{self.starts}.log").open("wb")
        # Forked from the tests' process that has imported flexq (tests/forks.py): each start is still a process of
        # its own, killed by its pid, for a third of a fresh interpreter's CPU.
        self.process = forks.popen(
            ["server", "--port", str(self.port), "--home", str(self.home), "--runtime", "none", "--tls-port", "0",
             *self.flags], stdout=log, stderr=log)
        log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}; {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if admin.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError("the server did not answer within its start time")

    def log_tail(self, lines: int = 30) -> str:
        """The end of the running (or last) server's log, for a failure's message."""
        log = self.home.parent / f"server-{self.starts - 1}.log"
        return f"the end of {log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def _retrying(call: Callable[[], httpx.Response], stop: threading.Event) -> httpx.Response | None:
    """``call`` until it gets an answer (the server may be down for a while)."""
    while not stop.is_set():
        try:
            return call()
        except httpx.HTTPError:
            stop.wait(0.1)
    return None


def batch_job(name: str, queue: str, tpu: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"parallelism": 1, "completions": 1, "suspend": True, "template": {"spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                             "cloud.google.com/gke-tpu-topology": "2x2"},
            "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "train", "image": "busybox", "command": ["true"],
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "google.com/tpu": str(tpu)},
                                          "limits": {"google.com/tpu": str(tpu)}}}]}}},
    }


class Creator(threading.Thread):
    """Creates ``jobs`` at ``rate`` a second; ``created`` holds those the server has (201, or 409 after a retry)."""

    def __init__(self, url: str, jobs: list[dict[str, Any]], rate: float) -> None:
        super().__init__(name="creator", daemon=True)
        self.url, self.jobs, self.rate = url, jobs, rate
        self.created: list[str] = []
        self.refused: list[str] = []
        self.stop = threading.Event()
        self.paused = threading.Event()
        """While set, no Job is created."""

    def run(self) -> None:
        with admin.client(self.url, timeout=10) as client:
            begun = time.monotonic()
            for i, job in enumerate(self.jobs):
                self.stop.wait(max(0.0, begun + i / self.rate - time.monotonic()))
                while self.paused.is_set() and not self.stop.is_set():
                    self.stop.wait(0.05)
                    begun += 0.05
                name = job["metadata"]["name"]
                answer = _retrying(lambda job=job: client.post(JOBS, json=job), self.stop)  # type: ignore[misc]
                if answer is None:
                    return
                if answer.status_code in (201, 409):
                    self.created.append(name)
                else:
                    self.refused.append(f"{name}: {answer.status_code} {answer.text[:200]}")


@dataclass
class Seen:
    """One workload, as the follower saw it over the run."""

    job: str
    admissions: int = 0
    """Times it was seen going from not admitted to admitted."""
    admitted: bool = False
    finished: bool = False
    admitted_after_finish: bool = False
    evictions: int = 0
    rv: str = ""


@dataclass
class Follower:
    """Watches the Workloads across restarts and finishes their Jobs ``runtime`` seconds after admission."""

    url: str
    runtime: float
    workloads: dict[str, Seen] = field(default_factory=dict)
    gone: int = 0
    """410 answers: a resourceVersion the server no longer had."""
    finish_errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    paused: threading.Event = field(default_factory=threading.Event)
    """While set, no Job is finished (their workloads keep their quota)."""
    _due: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    rv: str = ""
    _socket: socket.socket | None = field(default=None, repr=False)

    def threads(self) -> list[threading.Thread]:
        return [threading.Thread(target=self._watch, name="follower", daemon=True),
                threading.Thread(target=self._finish, name="finisher", daemon=True)]

    def finished(self) -> int:
        with self.lock:
            return sum(1 for s in self.workloads.values() if s.finished)

    def close(self) -> None:
        """Stop following now: the watch's connection is shut under it (an idle watch would wait for its next event,
        or for the end of a join's patience: 15 s of every run)."""
        self.stop.set()
        with contextlib.suppress(OSError):
            if self._socket is not None:
                self._socket.shutdown(socket.SHUT_RDWR)

    def _watch(self) -> None:
        with admin.client(self.url, timeout=httpx.Timeout(10, read=None)) as client:
            while not self.stop.is_set():
                try:
                    if not self.rv:
                        self._relist(client)
                    self._stream(client)
                except httpx.HTTPError:
                    self.stop.wait(0.1)  # the server is down: watch again from the last version seen

    def _relist(self, client: httpx.Client) -> None:
        body = client.get(WORKLOADS).json()
        for item in body["items"]:
            self.observe(item)
        self.rv = str(body["metadata"]["resourceVersion"])

    def _stream(self, client: httpx.Client) -> None:
        params = {"watch": "true", "resourceVersion": self.rv, "allowWatchBookmarks": "true"}
        with client.stream("GET", WORKLOADS, params=params) as answer:
            self._socket = answer.extensions["network_stream"].get_extra_info("socket")
            if self.stop.is_set():
                return
            for line in answer.iter_lines():
                if self.stop.is_set():
                    return
                if not line:
                    continue
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    self.gone += 1
                    self.rv = ""
                    return
                if event["type"] != "BOOKMARK":
                    self.observe(obj, deleted=event["type"] == "DELETED")
                self.rv = str(obj["metadata"]["resourceVersion"])

    def observe(self, wl: dict[str, Any], deleted: bool = False) -> None:
        owner = next(iter(wl["metadata"].get("ownerReferences") or []), {})
        if owner.get("kind") != "Job" or deleted:
            return  # the variants racing for a workload are followed through their parent
        name = wl["metadata"]["name"]
        conditions = {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or []}
        with self.lock:
            seen = self.workloads.setdefault(name, Seen(job=owner["name"]))
            seen.rv = str(wl["metadata"]["resourceVersion"])
            admitted = conditions.get("Admitted") == "True"
            if admitted and not seen.admitted:
                seen.admissions += 1
                seen.admitted_after_finish |= seen.finished
                self._due.setdefault(seen.job, time.monotonic() + self.runtime)
            if seen.admitted and not admitted and conditions.get("Finished") != "True":
                seen.evictions += 1
                self._due.pop(seen.job, None)
            seen.admitted = admitted
            seen.finished = seen.finished or conditions.get("Finished") == "True"

    def _finish(self) -> None:
        with admin.client(self.url, timeout=10) as client:
            while not self.stop.is_set():
                now = time.monotonic()
                with self.lock:
                    due = [] if self.paused.is_set() else [job for job, at in self._due.items() if at <= now]
                for job in due:
                    answer = _retrying(lambda job=job: client.patch(  # type: ignore[misc]
                        f"{JOBS}/{job}/status", content=json.dumps(_COMPLETE),
                        headers={"content-type": "application/merge-patch+json"}), self.stop)
                    if answer is None:
                        return
                    if answer.status_code != 200:
                        self.finish_errors.append(f"{job}: {answer.status_code} {answer.text[:200]}")
                    with self.lock:
                        self._due.pop(job, None)
                self.stop.wait(0.05)


_COMPLETE = {"status": {"succeeded": 1, "conditions": [
    {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "ByTest"}]}}


@contextlib.contextmanager
def running(*threads: threading.Thread) -> Iterator[None]:
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for thread in threads:
            thread.join(timeout=15)
