"""A plain Pod run locally: which pods run, their commands as processes, the statuses they go through, and
stopping one kills exactly its processes."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flexq.runtime.local_pods import LocalPod, container_env, image_name, local_argv, runs_locally
from flexq.runtime.rayjob import END_MARKER
from tests.support import eventually_value


@pytest.mark.parametrize(("image", "name"), [
    ("busybox", "busybox"), ("docker.io/library/busybox:1.36", "busybox"), ("python:3.12-slim", "python"),
    ("registry.k8s.io/e2e-test-images/agnhost:2.53", "agnhost"), ("alpine@sha256:abc", "alpine"),
])
def test_image_names(image: str, name: str) -> None:
    assert image_name(image) == name


@pytest.mark.parametrize(("containers", "local"), [
    ([{"name": "a", "image": "busybox", "command": ["sleep", "1"]}], True),
    ([{"name": "a", "image": "agnhost", "command": ["/bin/sh"], "args": ["-c", "sleep 1"]}], True),
    ([{"name": "a", "image": "agnhost", "args": ["entrypoint-tester"]}], True),
    ([{"name": "a", "image": "agnhost", "args": ["netexec"]}], False),
    ([{"name": "a", "image": "agnhost", "command": ["/agnhost"], "args": ["entrypoint-tester"]}], False),
    ([{"name": "a", "image": "gcr.io/k8s-staging-perf-tests/sleep:v0.1.0", "args": ["1m30s"]}], True),
    ([{"name": "a", "image": "gcr.io/k8s-staging-perf-tests/sleep:v0.1.0", "args": ["soon"]}], False),
    ([{"name": "a", "image": "busybox"}, {"name": "b", "image": "nginx"}], False),
])
def test_which_pods_run_locally(containers: list[dict[str, Any]], local: bool) -> None:
    assert runs_locally({"spec": {"containers": containers}}) is local


@pytest.mark.parametrize(("container", "argv"), [
    ({"image": "registry.k8s.io/e2e-test-images/agnhost:2.53", "args": ["entrypoint-tester", "hello", "world"]},
     ["echo", "[/agnhost entrypoint-tester hello world]"]),
    ({"image": "gcr.io/k8s-staging-perf-tests/sleep:v0.1.0", "args": ["1m30s"]}, ["sleep", "90"]),
    ({"image": "gcr.io/k8s-staging-perf-tests/sleep:v0.1.0", "args": ["250ms"]}, ["sleep", "0.25"]),
    ({"image": "busybox"}, ["true"]),
    ({"image": "nginx"}, None),
])
def test_what_test_images_run_here(container: dict[str, Any], argv: list[str] | None) -> None:
    assert local_argv(container) == argv


def test_env_from_the_pods_metadata() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "labels": {"a": "1"},
                        "annotations": {"batch.kubernetes.io/job-completion-index": "2"}}}
    container = {"env": [
        {"name": "LITERAL", "value": "x"},
        {"name": "INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
        {"name": "LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    ]}
    assert container_env(pod, container) == {"LITERAL": "x", "INDEX": "2", "LABEL": "1", "POD": "p", "NS": "ns"}


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def _run(pod: dict[str, Any], workdir: Path) -> tuple[LocalPod, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    def record(status: dict[str, Any]) -> None:
        with lock:
            seen.append(status)

    run = LocalPod(pod, workdir, record)
    run.start()
    return run, seen


def test_init_containers_then_containers_then_the_verdict(tmp_path: Path) -> None:
    pod = _pod({"initContainers": [{"name": "prepare", "image": "busybox", "command": ["sh", "-c", "echo ready > f"]}],
                "containers": [
                    {"name": "main", "image": "busybox", "command": ["sh", "-c", 'cat f; echo "$GREETING $HOSTNAME"'],
                     "env": [{"name": "GREETING", "value": "hello"}]},
                    {"name": "side", "image": "busybox", "command": ["sh", "-c", "exit 3"]}]})
    run, seen = _run(pod, tmp_path / "p")
    assert run.done.wait(20)
    phases = [s["phase"] for s in seen]
    assert phases[0] == "Pending" and "Running" in phases and phases[-1] == "Failed"
    final = {c["name"]: c["state"]["terminated"]["exitCode"] for c in seen[-1]["containerStatuses"]}
    assert final == {"main": 0, "side": 3}
    log = run.log_path.read_text()
    assert "ready\nhello p\n" in log and log.endswith(END_MARKER)


def test_a_missing_command_fails_the_pod(tmp_path: Path) -> None:
    run, seen = _run(_pod({"containers": [{"name": "main", "image": "busybox", "command": ["no-such-cmd-here"]}]}),
                     tmp_path / "p")
    assert run.done.wait(20)
    assert seen[-1]["phase"] == "Failed"
    assert seen[-1]["containerStatuses"][0]["state"]["terminated"]["reason"] == "StartError"


def test_an_application_image_runs_until_stopped(tmp_path: Path) -> None:
    run, seen = _run(_pod({"containers": [{"name": "app", "image": "example.com/app:1"}]}), tmp_path / "p")
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen[-1]["phase"] == "Running" and not run.done.is_set()
    run.stop()
    assert run.done.is_set() and [s["phase"] for s in seen] == ["Running"], "no status after a stop"


def test_stopping_kills_exactly_the_pods_processes(tmp_path: Path) -> None:
    run, seen = _run(_pod({"containers": [{"name": "main", "image": "busybox",
                                           "command": ["sh", "-c", "echo $$ > pid; sleep 60"]}]}), tmp_path / "p")
    pid_file = tmp_path / "p" / "pid"
    pid = int(eventually_value(lambda: (pid_file.exists() and pid_file.read_text().strip()) or None, timeout=10,
                               every=0.05, what="the pod's shell writes its pid"))
    assert os.getsid(pid) != os.getsid(0), "the pod's processes are a session apart from the server's"
    eventually_value(lambda: seen[-1]["phase"] == "Running", timeout=10,  # its run may tell it after the shell ran
                     what="the run reports the pod Running")
    run.stop()
    assert run.done.is_set()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert seen[-1]["phase"] == "Running", "a stopped pod's end is not reported by its run"
