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
volumes, ``valueFrom`` env other than those ``fieldRef``s, CPU limits. Each pod's processes run as its namespace's
job user in a process tree of their own (a cgroup, with the pod's memory limit and a cap on its tasks where the
machine lets them be set), and the pod's end, deletion or eviction ends every process of that tree.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol

from flexq.api import parse_quantity
from flexq.config import write_private
from flexq.runtime.job_user import job_user
from flexq.runtime.process_tree import Limits, ProcessTree, exit_status, pid_alive
from flexq.runtime.rayjob import END_MARKER

__all__ = ["GENERIC_IMAGES", "SHELLS", "LocalPod", "container_argv", "container_env", "image_name", "local_argv",
           "pod_limits", "pod_log_path", "pod_run_dir", "pod_workdir", "runs_locally"]

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


def pod_run_dir(home: Path, namespace: str, name: str, uid: str) -> Path:
    """The server's own folder for one run of a pod (0700, the server's user's): its log, its record, its
    containers' exit codes. The pod's uid keeps a pod made again under the same name apart."""
    return home / "runs" / "pods" / namespace / f"{name}.{uid}"


def pod_workdir(home: Path, namespace: str, name: str, uid: str) -> Path:
    """The pod's working directory (its commands' ``HOME`` and current directory), its job user's: new for each
    pod, removed with it."""
    return home / "runtime" / "pods" / namespace / f"{name}.{uid}"


def pod_log_path(home: Path, namespace: str, name: str, uid: str) -> Path:
    return pod_run_dir(home, namespace, name, uid) / "log"


_RECORD: Final = "run.json"
_POD_PIDS: Final = 4096
"""The tasks (threads included) a plain pod's processes may have at once, where the machine lets it be set."""


def pod_limits(pod: Mapping[str, Any]) -> Limits:
    """A pod's limits on this machine: the sum of its containers' memory limits (where each gives one), and
    :data:`_POD_PIDS` tasks."""
    spec = pod.get("spec") or {}
    memory: int | None = 0
    for container in spec.get("containers") or []:
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if limit is None or memory is None:
            memory = None
            continue
        try:
            memory += -(-parse_quantity(str(limit)).milli() // 1000)
        except (ValueError, ArithmeticError):
            memory = None
    return Limits(memory=memory or None, pids=_POD_PIDS)


class LocalPod:
    """Run one pod; ``on_status`` receives the pod's status (phase, conditions, container states) at each change.

    The pod's processes run as its namespace's job user, in a process tree of their own
    (:class:`~flexq.runtime.process_tree.ProcessTree`), with their output going to the pod's log in a folder of the
    server's (``run_dir``), never to a file in the working directory, which the job can replace with a link. The
    run keeps a record there (the tree, each container's launcher, its start); a server started after a crash
    follows the run again from it (:meth:`resume`) instead of starting it twice. The pod's end, deletion or
    eviction ends every process of the tree, ``setsid`` or not."""

    def __init__(self, pod: Mapping[str, Any], workdir: Path, on_status: Callable[[dict[str, Any]], None],
                 run_dir: Path | None = None) -> None:
        self.pod = pod
        self.workdir = workdir
        self.run_dir = run_dir if run_dir is not None else workdir.with_name(workdir.name + ".run")
        self.log_path = self.run_dir / "log"
        self.on_status = on_status
        self._stop = threading.Event()
        self._processes: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pod-{pod['metadata']['name']}", daemon=True)
        self.started = ""
        self.tree: ProcessTree | None = None
        self._record: dict[str, Any] = {}
        self._log_fd = -1
        self.abandoned = False
        """Stopped because the server is going (not by the pod's end, deletion or eviction): the record says so,
        and the next server replaces the pod's run rather than counting it as failed."""

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"].get("namespace") or "default")

    def start(self) -> None:
        self._prepare()
        self.tree = ProcessTree.create(f"pod-{self.pod['metadata']['name']}", pod_limits(self.pod))
        self._record = {"uid": str(self.pod["metadata"].get("uid", "")), "tree": self.tree.to_record(),
                        "containers": {}, "started": _stamp()}
        self._save()
        self._thread.start()

    def _prepare(self) -> None:
        """A fresh working directory, the job user's, and the server's own folder with the log."""
        self.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o700)
        if self.workdir.exists() or self.workdir.is_symlink():  # never an earlier run's: what it left goes
            shutil.rmtree(self.workdir, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                self.workdir.unlink()
        self.workdir.mkdir(mode=0o700, parents=True)
        job_user(self.namespace).give(self.workdir)  # its commands' own directory, and nothing else of the server's
        self._open_log()

    def _open_log(self) -> None:
        """The pod's log, open for appending (its containers' output goes to this descriptor)."""
        if self._log_fd < 0:
            self._log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW |
                                   os.O_CLOEXEC, 0o600)

    def _close_log(self) -> None:
        if self._log_fd >= 0:
            os.close(self._log_fd)
            self._log_fd = -1

    def _note(self, text: str) -> None:
        """A line of flexq's own in the pod's log."""
        self._open_log()
        os.write(self._log_fd, text.encode())

    def _save(self) -> None:
        """The run's record, written whole or not at all in the server's folder."""
        write_private(self.run_dir / _RECORD, json.dumps(self._record, sort_keys=True))

    def stop(self, wait: float = 10.0, abandon: bool = False) -> None:
        """Kill every process of the pod's tree; no status is written after this. ``abandon``: the server is going
        (the record says so, see :attr:`abandoned`)."""
        if abandon and not self.done.is_set():
            self.abandoned = True
            with self._lock, contextlib.suppress(OSError):
                self._record["abandoned"] = True
                self._save()
        self._stop.set()
        if self.tree is not None:
            self.tree.kill()
        with self._lock:
            processes = list(self._processes)
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        self._thread.join(timeout=wait)

    def remove(self) -> None:
        """The pod was deleted: its processes are ended, its working directory and the server's folder removed."""
        self.stop(wait=2.0)
        if self.tree is not None:
            self.tree.remove()
        shutil.rmtree(self.workdir, ignore_errors=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)

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
        if phase in ("Succeeded", "Failed"):
            with self._lock, contextlib.suppress(OSError):
                self._record["ended"] = {"phase": phase, "states": states}
                self._save()
        if not self._stop.is_set():
            self.on_status(self._status(phase, states))

    def _run(self) -> None:
        self.started = self._record.get("started") or _stamp()
        spec = self.pod.get("spec") or {}
        containers = spec.get("containers") or []
        states: dict[str, dict[str, Any]] = {}
        try:
            if not runs_locally(self.pod):
                self._note("flexq: this pod's images are not run on this machine; it is shown Running until it is "
                           "deleted\n")
                states = {str(c.get("name")): {"running": {"startedAt": self.started}} for c in containers}
                self._report("Running", states)
                self._stop.wait()
                return
            self._report("Pending", states)
            for number, init in enumerate(spec.get("initContainers") or []):
                code = self._wait(self._spawn(init, f"init-{number}"))
                if code != 0:
                    self._report("Failed", {str(c.get("name")): {"waiting": {"reason": "PodInitializing"}}
                                            for c in containers})
                    return
            started = {str(c.get("name")): (self._spawn(c, f"main-{n}"), _stamp()) for n, c in enumerate(containers)}
            states = {name: {"running": {"startedAt": at}} for name, (_, at) in started.items()}
            self._report("Running", states)
            self._finish_containers(started, states)
        except OSError as exc:  # the command is not on this machine
            self._note(f"flexq: the container could not start: {exc}\n")
            self._report("Failed", {str(c.get("name")): {"terminated": {"exitCode": 127, "reason": "StartError",
                                                                        "message": str(exc)}} for c in containers})
        finally:
            self._end()

    def _finish_containers(self, started: Mapping[str, tuple[Any, str]], states: dict[str, dict[str, Any]]) -> None:
        """Wait for each started container (a process of this server's, or a launcher found again) to end, then
        report the pod's end."""
        for name, (process, at) in started.items():
            code = self._wait(process)
            states[name] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                           "startedAt": at, "finishedAt": _stamp()}}
            if any("running" in s for s in states.values()):
                self._report("Running", states)
        ok = all(s["terminated"]["exitCode"] == 0 for s in states.values())
        self._report("Succeeded" if ok else "Failed", states)

    def _end(self) -> None:
        """The pod has ended (or was stopped): whatever its containers left running goes with the tree."""
        if self.tree is not None:
            self.tree.kill(grace=0.5)
            self.tree.remove()
        with contextlib.suppress(OSError):
            self._note(END_MARKER)
        self._close_log()
        self.done.set()

    def _spawn(self, container: Mapping[str, Any], slot: str) -> subprocess.Popen[bytes]:
        argv = local_argv(container) or ["true"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir),
               "HOSTNAME": str(self.pod["metadata"]["name"]), **container_env(self.pod, container)}
        assert self.tree is not None
        if shutil.which(argv[0], path=env["PATH"]) is None:  # as the runtime refuses it, before anything starts
            raise FileNotFoundError(errno.ENOENT, f'exec: "{argv[0]}": executable file not found in $PATH')
        with self._lock:
            if self._stop.is_set():
                raise OSError("the pod was stopped")
            process = self.tree.spawn(argv, cwd=self.workdir, env=env, stdout=self._log_fd,
                                      user=job_user(self.namespace).credentials(),
                                      status=self.run_dir / f"{slot}.exit")
            self._processes.append(process)
            self._record["tree"] = self.tree.to_record()
            self._record["containers"][slot] = {"pid": process.pid, "started": _stamp()}
            self._save()
        return process

    def _wait(self, process: _Waitable) -> int:
        while process.poll() is None:
            if self._stop.wait(0.2) and self.tree is not None:
                self.tree.kill()
        return int(process.returncode if process.returncode is not None else 137)

    # --- found again after a restart ----------------------------------------------------------------

    @classmethod
    def resume(cls, pod: Mapping[str, Any], workdir: Path, on_status: Callable[[dict[str, Any]], None],
               run_dir: Path) -> LocalPod | None:
        """The run of ``pod`` that an earlier server started, followed again from its record: its containers that
        still run are waited for, those that ended while no server ran are read from their exit codes; nothing is
        started again. None where there is no record of this pod's run, or the run was abandoned by a server that
        stopped (the caller replaces it)."""
        try:
            record = json.loads((run_dir / _RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("uid") != str(pod["metadata"].get("uid", "")) \
                or record.get("abandoned"):
            return None
        run = cls(pod, workdir, on_status, run_dir)
        run._record = record
        run.tree = ProcessTree.from_record(record.get("tree") or {})
        run._thread = threading.Thread(target=run._follow, name=f"pod-{pod['metadata']['name']}", daemon=True)
        return run

    def start_following(self) -> None:
        """Follow the run :meth:`resume` found (no process is started)."""
        self._open_log()
        self._thread.start()

    def _follow(self) -> None:
        self.started = str(self._record.get("started") or _stamp())
        spec = self.pod.get("spec") or {}
        containers = spec.get("containers") or []
        ended = self._record.get("ended")
        try:
            if isinstance(ended, dict):  # it ended before the server went: its end is reported again
                self._report(str(ended.get("phase")), dict(ended.get("states") or {}))
                return
            slots = self._record.get("containers") or {}
            if not runs_locally(self.pod):
                self._report("Running", {str(c.get("name")): {"running": {"startedAt": self.started}}
                                         for c in containers})
                self._stop.wait()
                return
            if any(f"main-{n}" not in slots for n in range(len(containers))):
                # The server went while the pod was starting (its init containers ran): it is not started twice.
                self._note("flexq: the server restarted while the pod was starting; the pod failed\n")
                self._report("Failed", {str(c.get("name")): {"terminated": {
                    "exitCode": 137, "reason": "Error", "message": "the server restarted while the pod was starting"}}
                    for c in containers})
                return
            self._note("flexq: the server restarted; the pod's processes ran on and are followed again\n")
            started = {str(c.get("name")): (_Launcher(int(slots[f"main-{n}"]["pid"]), self.run_dir / f"main-{n}.exit",
                                                      self.tree), str(slots[f"main-{n}"].get("started", "")))
                       for n, c in enumerate(containers)}
            states: dict[str, dict[str, Any]] = {name: {"running": {"startedAt": at}} for name, (_, at) in
                                                 started.items()}
            self._report("Running", states)
            self._finish_containers(started, states)
        except OSError as exc:
            self._note(f"flexq: the pod could not be followed again: {exc}\n")
        finally:
            self._end()


class _Waitable(Protocol):
    returncode: int | None

    def poll(self) -> int | None: ...


class _Launcher:
    """A container's launcher started by an earlier server: not this server's child, so followed by its pid (while
    it is in the pod's tree: a pid used again by another process is not mistaken for it) and its exit file."""

    def __init__(self, pid: int, status: Path, tree: ProcessTree | None) -> None:
        self.pid, self.status, self.tree = pid, status, tree
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        code = exit_status(self.status)
        if code is not None:
            self.returncode = code
            return code
        members = self.tree.members() if self.tree is not None and self.tree.contained else [self.pid]
        if self.pid in members and pid_alive(self.pid):
            return None
        code = exit_status(self.status)  # written as it ended
        self.returncode = code if code is not None else 137  # killed before it could say: as a SIGKILL
        return self.returncode
