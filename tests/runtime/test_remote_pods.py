"""A Pod on an existing Ray cluster, without Ray: what is submitted for each container (command, literal env), the
statuses written as the jobs end (init containers first; a failed one fails the pod before the others start), a
container with no command shown Running until stopped, and stopping stops the jobs there."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from flexq.runtime import remote_pods
from flexq.runtime.remote import RemoteRayCluster
from flexq.runtime.remote_pods import RemotePod


class FakeCluster(RemoteRayCluster):
    """The cluster's Jobs API as the pod sees it: each submitted job ends as ``outcome`` says."""

    def __init__(self, outcome: dict[str, str]) -> None:
        super().__init__("http://head:8265", "ray-a")
        self.outcome = outcome
        self.submitted: list[tuple[str, dict[str, str]]] = []
        self.ids: dict[str, str] = {}
        self.stopped: list[str] = []

    def submit(self, entrypoint: str, submission: str, env_vars: Any, working_dir: Path | None,
               stop: threading.Event, runtime_env: Any = None) -> None:
        self.submitted.append((entrypoint, dict(env_vars)))
        self.ids[submission] = entrypoint

    def get(self, url: str, timeout: float = 0) -> Any:
        job = url.split("/api/jobs/")[1].removesuffix("/logs")
        if url.endswith("/logs"):
            return SimpleNamespace(json=lambda: {"logs": f"ran {self.ids[job]}\n"})
        return SimpleNamespace(json=lambda: {"status": self.outcome.get(self.ids[job], "RUNNING")})

    def post(self, url: str, timeout: float = 0) -> Any:
        self.stopped.append(url)
        return SimpleNamespace()


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": containers, **({"initContainers": init} if init else {})}}


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pod: dict[str, Any],
         outcome: dict[str, str]) -> tuple[FakeCluster, list[dict[str, Any]], RemotePod]:
    cluster = FakeCluster(outcome)
    monkeypatch.setattr(remote_pods, "httpx", SimpleNamespace(get=cluster.get, post=cluster.post,
                                                              HTTPError=httpx.HTTPError))
    monkeypatch.setattr(remote_pods, "_POLL", 0.01)
    statuses: list[dict[str, Any]] = []
    run = RemotePod(pod, tmp_path, statuses.append, cluster)
    run.start()
    return cluster, statuses, run


def test_each_container_runs_as_a_job_and_the_pod_ends_as_they_do(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pod = _pod([{"name": "a", "command": ["sh", "-c", "echo a b"], "env": [{"name": "X", "value": "1"},
                                                                          {"name": "Y", "valueFrom": {}}]},
                {"name": "b", "args": ["false"]}], init=[{"name": "i", "command": ["true"]}])
    cluster, statuses, run = _run(tmp_path, monkeypatch, pod, {"true": "SUCCEEDED", "sh -c 'echo a b'": "SUCCEEDED",
                                                               "false": "FAILED"})
    assert run.done.wait(10)
    assert cluster.submitted == [("true", {}), ("sh -c 'echo a b'", {"X": "1"}), ("false", {})]
    assert [s["phase"] for s in statuses] == ["Pending", "Running", "Failed"]
    final = {c["name"]: c["state"]["terminated"]["exitCode"] for c in statuses[-1]["containerStatuses"]}
    assert final == {"a": 0, "b": 1}
    log = run.log_path.read_text()
    assert "the pod runs on the Ray cluster of node pool ray-a" in log and "ran true" in log and "ran false" in log


def test_a_failed_init_container_fails_the_pod_before_the_others_start(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pod = _pod([{"name": "a", "command": ["echo"]}], init=[{"name": "i", "command": ["false"]}])
    cluster, statuses, run = _run(tmp_path, monkeypatch, pod, {"false": "FAILED"})
    assert run.done.wait(10)
    assert cluster.submitted == [("false", {})] and [s["phase"] for s in statuses] == ["Pending", "Failed"]


def test_stopping_stops_its_jobs_there_and_a_container_without_a_command_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, statuses, run = _run(tmp_path, monkeypatch, _pod([{"name": "a", "command": ["sleep", "600"]}]), {})
    deadline = time.monotonic() + 10
    while not cluster.submitted and time.monotonic() < deadline:
        time.sleep(0.01)
    run.stop(wait=5)
    assert run.done.is_set() and [u.rsplit("/", 2)[-1] for u in cluster.stopped] == ["stop"]
    assert [s["phase"] for s in statuses] == ["Pending", "Running"], "nothing written after the stop"
    idle, idle_statuses, waiting = _run(tmp_path / "idle", monkeypatch, _pod([{"name": "a", "image": "app"}]), {})
    deadline = time.monotonic() + 10
    while not idle_statuses and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [s["phase"] for s in idle_statuses] == ["Running"] and idle.submitted == []
    waiting.stop(wait=5)
    assert waiting.done.is_set() and idle.stopped == []
