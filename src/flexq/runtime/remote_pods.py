"""A plain Pod admitted onto a node pool of an existing Ray cluster: its containers' commands run there, as Ray jobs.

Each container's ``command`` + ``args`` (with its literal ``env`` values) is submitted to the cluster through its
Jobs API, init containers first, one after another; the pod is Running while they run, then Succeeded (every job
succeeded) or Failed, and their logs, read from the cluster, are the pod's log. Stopping the pod (deleted, or its
workload evicted) stops its jobs there, never the cluster. A container with neither ``command`` nor ``args`` (an
image's own entrypoint) cannot run as a Ray job: the pod is shown Running until it is deleted, as a local pod whose
images are not run here is.
"""

from __future__ import annotations

import contextlib
import shlex
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import httpx

from flexq.runtime.local_pods import LocalPod, container_argv
from flexq.runtime.rayjob import END_MARKER
from flexq.runtime.remote import RemoteRayCluster
from flexq.store import rfc3339

__all__ = ["RemotePod"]

_POLL: Final = 1.0
_DONE: Final = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


class RemotePod(LocalPod):
    """Run one pod's containers as Ray jobs on ``cluster``; ``on_status`` receives the pod's status at each change."""

    def __init__(self, pod: Mapping[str, Any], workdir: Path, on_status: Callable[[dict[str, Any]], None],
                 cluster: RemoteRayCluster, run_dir: Path | None = None) -> None:
        super().__init__(pod, workdir, on_status, run_dir)
        self.cluster = cluster
        self._jobs: list[str] = []

    def start(self) -> None:
        """Its log in the server's folder; nothing runs on this machine, so no process tree is made."""
        self._prepare()
        self._thread.start()

    def stop(self, wait: float = 10.0, abandon: bool = False) -> None:
        """Stop the pod's jobs on the cluster; no status is written after this."""
        self._stop.set()
        with self._lock:
            jobs = list(self._jobs)
        for job in jobs:  # an unreachable cluster: its job ends with it, or is stopped by whoever runs it
            with contextlib.suppress(httpx.HTTPError):
                httpx.post(f"{self.cluster.url}/api/jobs/{job}/stop", timeout=10)
        self._thread.join(timeout=wait)

    def _log(self, text: str) -> None:
        self._note(text)

    def _run(self) -> None:
        self.started = rfc3339(datetime.now(UTC))
        spec = self.pod.get("spec") or {}
        containers = spec.get("containers") or []
        self._log(f"flexq: the pod runs on the Ray cluster of node pool {self.cluster.pool} (its dashboard "
                  f"{self.cluster.url}), each container as a Ray job\n")
        try:
            if not all(container_argv(c) for c in [*(spec.get("initContainers") or []), *containers]):
                self._log("flexq: a container has no command to run as a Ray job; it is shown Running until it is "
                          "deleted\n")
                self._report("Running", {str(c.get("name")): {"running": {"startedAt": self.started}}
                                         for c in containers})
                self._stop.wait()
                return
            self._report("Pending", {})
            for init in spec.get("initContainers") or []:
                if self._finish(self._submit(init)) != 0:
                    self._report("Failed", {str(c.get("name")): {"waiting": {"reason": "PodInitializing"}}
                                            for c in containers})
                    return
            jobs = {str(c.get("name")): (self._submit(c), rfc3339(datetime.now(UTC))) for c in containers}
            states: dict[str, dict[str, Any]] = {name: {"running": {"startedAt": at}} for name, (_, at) in jobs.items()}
            self._report("Running", states)
            for name, (job, at) in jobs.items():
                code = self._finish(job)
                states[name] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                               "startedAt": at, "finishedAt": rfc3339(datetime.now(UTC))}}
            ok = all(s["terminated"]["exitCode"] == 0 for s in states.values())
            self._report("Succeeded" if ok else "Failed", states)
        except (RuntimeError, httpx.HTTPError) as exc:  # refused, or the cluster cannot be reached
            self._log(f"flexq: {exc}\n")
            self._report("Failed", {str(c.get("name")): {"terminated": {"exitCode": 1, "reason": "StartError",
                                                                        "message": str(exc)}} for c in containers})
        finally:
            self._log(END_MARKER)
            self._close_log()
            self.done.set()

    def _submit(self, container: Mapping[str, Any]) -> str:
        job = f"flexq-pod-{self.pod['metadata']['name']}-{container.get('name')}-{uuid.uuid4().hex[:8]}"
        env = {str(e["name"]): str(e["value"]) for e in container.get("env") or [] if "value" in e}
        with self._lock:
            self._jobs.append(job)
        self.cluster.submit(shlex.join(container_argv(container)), job, env, None, self._stop)
        return job

    def _finish(self, job: str) -> int:
        """Wait for ``job`` to end (or the pod to stop); its log goes to the pod's; 0 if it succeeded."""
        status = ""
        while status not in _DONE and not self._stop.is_set():
            status = str(httpx.get(f"{self.cluster.url}/api/jobs/{job}", timeout=30).json().get("status", ""))
            if status not in _DONE:
                self._stop.wait(_POLL)
        logs = httpx.get(f"{self.cluster.url}/api/jobs/{job}/logs", timeout=30).json().get("logs", "")
        self._log(str(logs))
        return 0 if status == "SUCCEEDED" else 1
