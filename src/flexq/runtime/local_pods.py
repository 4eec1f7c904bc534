"""A plain Pod, run where that is meaningful: its containers' commands as local processes.

What is emulated: a container whose image is a generic one (a shell or language base image: busybox,
alpine, ubuntu, debian, python, ...), or whose ``command`` is a shell (``sh``, ``/bin/sh``, ``bash``), runs
``command`` + ``args`` (``args`` alone when there is no ``command``, as those images have no entrypoint) as
a local process, in a directory of the pod's own, with the container's ``env`` (literal values, and ``fieldRef``s to
the pod's name, namespace, uid, labels and annotations, as a Job's ``JOB_COMPLETION_INDEX`` is given); init
containers run first, one after another. Two test images of Kubernetes' own, used by Kueue's examples, do here what
they do there: agnhost's ``entrypoint-tester`` prints its arguments, and ``k8s-staging-perf-tests/sleep`` sleeps for
the duration its argument gives. The pod is Running while they run, then Succeeded (every container
exited 0) or Failed. Their output is the pod's log (``kubectl logs``; all containers in one log). A pod with
any other container (an application whose binary is not on this machine) is shown Running until it is
deleted or evicted. Not emulated: restarts (``restartPolicy`` is not applied: a container runs once), probes,
volumes, ``valueFrom`` env other than those ``fieldRef``s, resource limits. Each pod's processes run in a session
of their own, and stopping the pod kills exactly that session.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from flexq.runtime.job_user import job_user
from flexq.runtime.rayjob import END_MARKER

__all__ = ["GENERIC_IMAGES", "SHELLS", "LocalPod", "container_argv", "container_env", "image_name", "local_argv",
           "runs_locally"]

GENERIC_IMAGES: Final = frozenset({"busybox", "alpine", "ubuntu", "debian", "bash", "python", "fedora", "centos",
                                   "rockylinux", "almalinux", "amazonlinux", "ubi8", "ubi9", "ubi-minimal",
                                   "ubi8-minimal", "ubi9-minimal", "perl", "ruby", "node"})


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def image_name(image: str) -> str:
    """``docker.io/library/busybox:1.36`` -> ``busybox``."""
    base = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return base.split(":", 1)[0]


SHELLS: Final = frozenset({"sh", "/bin/sh", "bash", "/bin/bash", "/usr/bin/bash", "/usr/bin/sh"})


def runs_locally(pod: Mapping[str, Any]) -> bool:
    """Whether every container has a generic image, runs a shell script or is a test image emulated here, so its
    command means the same here."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return bool(containers) and all(local_argv(c) is not None for c in containers)


def container_argv(container: Mapping[str, Any]) -> list[str]:
    """What a container runs: its ``command`` then its ``args``."""
    return [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]


_GO_DURATION: Final = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)")
_GO_UNITS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _go_seconds(text: str) -> float | None:
    """A Go duration (``30s``, ``1m30s``) in seconds, or None."""
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


def local_argv(container: Mapping[str, Any]) -> list[str] | None:
    """What runs here for ``container`` (see the module's text), or None where its image is not run on this
    machine."""
    image = image_name(str(container.get("image") or ""))
    argv = container_argv(container)
    if image in GENERIC_IMAGES or next(iter(container.get("command") or []), "") in SHELLS:
        return argv or ["true"]  # a shell image with no command exits at once
    args = [str(a) for a in container.get("args") or []]
    if container.get("command"):
        return None
    if image == "agnhost" and args[:1] == ["entrypoint-tester"]:
        return ["echo", "[" + " ".join(["/agnhost", *args]) + "]"]  # Go's fmt of os.Args
    if image == "sleep" and len(args) == 1 and (seconds := _go_seconds(args[0])) is not None:
        return ["sleep", f"{seconds:g}"]
    return None


def _field(pod: Mapping[str, Any], path: str) -> str | None:
    """A ``fieldRef``'s value: ``metadata.name``, ``metadata.labels['k']``, ... (None for other fields)."""
    meta = pod.get("metadata") or {}
    if path in ("metadata.name", "metadata.namespace", "metadata.uid"):
        return str(meta.get(path.partition(".")[2], "default" if path == "metadata.namespace" else ""))
    found = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if found is None:
        return None
    return str((meta.get(found.group(1)) or {}).get(found.group(2), ""))


def container_env(pod: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, str]:
    """A container's ``env``: literal values, and ``fieldRef``s to the pod's metadata."""
    out: dict[str, str] = {}
    for entry in container.get("env") or []:
        if "value" in entry:
            out[str(entry["name"])] = str(entry["value"])
            continue
        path = str(((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", ""))
        value = _field(pod, path) if path else None
        if value is not None:
            out[str(entry["name"])] = value
    return out


class LocalPod:
    """Run one pod; ``on_status`` receives the pod's status (phase, conditions, container states) at each change."""

    def __init__(self, pod: Mapping[str, Any], workdir: Path, on_status: Callable[[dict[str, Any]], None]) -> None:
        self.pod = pod
        self.workdir = workdir
        self.log_path = workdir / "pod.log"
        self.on_status = on_status
        self._stop = threading.Event()
        self._processes: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pod-{pod['metadata']['name']}", daemon=True)
        self.started = ""

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text("", encoding="utf-8")
        job_user().give(self.workdir)  # its commands' own directory, and nothing else of the server's
        self._thread.start()

    def stop(self, wait: float = 10.0) -> None:
        """Kill the pod's processes (their sessions only); no status is written after this."""
        self._stop.set()
        with self._lock:
            processes = list(self._processes)
        for process in processes:
            _kill(process)
        self._thread.join(timeout=wait)

    def _status(self, phase: str, states: dict[str, dict[str, Any]]) -> dict[str, Any]:
        running = phase == "Running"
        containers = (self.pod.get("spec") or {}).get("containers") or []
        ready = "True" if running and all("running" in states.get(str(c.get("name")), {}) for c in containers) \
            else "False"
        conditions = [{"type": t, "status": s} for t, s in (
            ("PodScheduled", "True"), ("Initialized", "True" if phase != "Pending" else "False"),
            ("ContainersReady", ready), ("Ready", ready))]
        waiting = {"waiting": {"reason": "PodInitializing"}}
        return {"phase": phase, "conditions": conditions, "startTime": self.started, "podIP": "127.0.0.1",
                "hostIP": "127.0.0.1",
                "containerStatuses": [{"name": c.get("name"), "image": c.get("image", ""), "restartCount": 0,
                                       "ready": "running" in states.get(str(c.get("name")), {}),
                                       "started": "running" in states.get(str(c.get("name")), {}),
                                       "state": states.get(str(c.get("name")), waiting)}
                                      for c in containers]}

    def _report(self, phase: str, states: dict[str, dict[str, Any]]) -> None:
        if not self._stop.is_set():
            self.on_status(self._status(phase, states))

    def _run(self) -> None:
        self.started = _stamp()
        spec = self.pod.get("spec") or {}
        containers = spec.get("containers") or []
        states: dict[str, dict[str, Any]] = {}
        try:
            if not runs_locally(self.pod):
                with self.log_path.open("a", encoding="utf-8") as log:
                    log.write("flexq: this pod's images are not run on this machine; it is shown Running until "
                              "it is deleted\n")
                states = {str(c.get("name")): {"running": {"startedAt": self.started}} for c in containers}
                self._report("Running", states)
                self._stop.wait()
                return
            self._report("Pending", states)
            for init in spec.get("initContainers") or []:
                code = self._wait(self._spawn(init))
                if code != 0:
                    self._report("Failed", {str(c.get("name")): {"waiting": {"reason": "PodInitializing"}}
                                            for c in containers})
                    return
            started = {str(c.get("name")): (self._spawn(c), _stamp()) for c in containers}
            states = {name: {"running": {"startedAt": at}} for name, (_, at) in started.items()}
            self._report("Running", states)
            for name, (process, at) in started.items():
                code = self._wait(process)
                states[name] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                               "startedAt": at, "finishedAt": _stamp()}}
                if any("running" in s for s in states.values()):
                    self._report("Running", states)
            ok = all(s["terminated"]["exitCode"] == 0 for s in states.values())
            self._report("Succeeded" if ok else "Failed", states)
        except OSError as exc:  # the command is not on this machine
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(f"flexq: the container could not start: {exc}\n")
            self._report("Failed", {str(c.get("name")): {"terminated": {"exitCode": 127, "reason": "StartError",
                                                                        "message": str(exc)}} for c in containers})
        finally:
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(END_MARKER)
            self.done.set()

    def _spawn(self, container: Mapping[str, Any]) -> subprocess.Popen[bytes]:
        argv = local_argv(container) or ["true"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir),
               "HOSTNAME": str(self.pod["metadata"]["name"]), **container_env(self.pod, container)}
        with self.log_path.open("ab") as log, self._lock:
            if self._stop.is_set():
                raise OSError("the pod was stopped")
            process = subprocess.Popen(argv, cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True, **job_user().spawn_options())
            self._processes.append(process)
        return process

    def _wait(self, process: subprocess.Popen[bytes]) -> int:
        while process.poll() is None:
            if self._stop.wait(0.2):
                _kill(process)
        return int(process.returncode)


def _kill(process: subprocess.Popen[bytes], grace: float = 2.0) -> None:
    """SIGTERM the process's session, SIGKILL it after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
