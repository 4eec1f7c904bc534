"""Finding Ray clusters again after a restart, without Ray: records are written atomically and read back, a record
nobody owns has its processes killed (its head's session, and what carries its temp dir in a session of its own),
and a running job whose cluster is gone (or does not answer) fails with RayClusterLost as its backoffLimit says."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.controller.ray_runs import RayRuntime
from flexq.runtime import reattach
from flexq.runtime.elastic import ElasticWorkers, GroupShape
from flexq.runtime.emulation import Accelerators
from flexq.runtime.ray_cluster import Detached, LocalRayCluster
from flexq.runtime.reattach import read_records, reap_all, record_path
from flexq.store import Key, Store
from tests.conftest import free_port
from tests.runtime.test_cluster_objects import CLUSTER
from tests.runtime.test_guide_end_to_end import FAILING
from tests.support import eventually

SLEEP = "import time; time.sleep(120)"
FAMILY = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
          "time.sleep(120)")


class FakeCluster:
    """Processes that look like a cluster's to flexq: a head ``ray start`` (its command line holds the temp dir)
    with a child in its session, and a driver in a session of its own carrying the temp dir in its environment."""

    def __init__(self) -> None:
        self.temp = Path(tempfile.mkdtemp(prefix="fqr-", dir="/tmp"))
        env = {**os.environ, "TMPDIR": str(self.temp)}
        self.head = subprocess.Popen([sys.executable, "-c", FAMILY, f"--temp-dir={self.temp}"], env=env,
                                     start_new_session=True)
        self.driver = subprocess.Popen([sys.executable, "-c", SLEEP], env=env, start_new_session=True)
        deadline = time.monotonic() + 10
        while len(self.members()) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(self.members()) == 3

    def record(self, uid: str, dashboard: int = 0, **extra: Any) -> dict[str, Any]:
        return {"pid": self.head.pid, "temp_dir": str(self.temp), "gcs_port": free_port(), "dashboard_port":
                dashboard or free_port(), "client_port": free_port(), "workers": {}, "uid": uid, **extra}

    def members(self) -> list[int]:
        """The live processes: the head's session, and the driver."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if fields[0] != "Z" and (int(fields[3]) == self.head.pid or int(entry.name) == self.driver.pid):
                found.append(int(entry.name))
        return found

    def close(self) -> None:
        for proc in (self.head, self.driver):
            proc.kill()
            proc.wait()
        for pid in self.members():
            os.kill(pid, 9)
        subprocess.run(["rm", "-rf", str(self.temp)], check=False)


@pytest.fixture(autouse=True)
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may start a Ray cluster."""

    def refuse(_cluster: LocalRayCluster, timeout: float = 0.0) -> None:
        raise AssertionError("a Ray cluster was started")

    monkeypatch.setattr(LocalRayCluster, "start", refuse)


@pytest.fixture
def fake() -> Iterator[FakeCluster]:
    cluster = FakeCluster()
    try:
        yield cluster
    finally:
        cluster.close()


def _write(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def _job(status: dict[str, Any], backoff: int = 0) -> dict[str, Any]:
    job = next(d for d in yaml.safe_load_all(FAILING) if d["kind"] == "RayJob")
    job["spec"].update(suspend=False, backoffLimit=backoff)
    job["metadata"].update(namespace="default", uid="uid-1")
    job["status"] = status
    return dict(job)


def test_a_record_is_written_atomically_and_found_again(tmp_path: Path, fake: FakeCluster) -> None:
    path = record_path(tmp_path, "rayjobs", "default", "broken")
    cluster = LocalRayCluster(Accelerators(), process=fake.head, temp_dir=fake.temp, gcs_port=1, dashboard_port=2,
                              client_port=3, record_path=path, record={"uid": "uid-1"})
    cluster.save_record()
    (path.parent / "other.json.partial").write_text("{")  # a server killed mid-write leaves this
    found = read_records(tmp_path, "rayjobs")
    assert list(found) == [("default", "broken")] and not list(path.parent.glob("*.partial"))
    again = LocalRayCluster.from_record(found[("default", "broken")][1], path)
    assert isinstance(again.process, Detached) and again.process.pid == fake.head.pid and again.alive()
    cluster.workers["cpu-0"] = (fake.driver, Path("/tmp/fqw-x"))
    cluster.save_record()
    worker = LocalRayCluster.from_record(read_records(tmp_path, "rayjobs")[("default", "broken")][1]).workers["cpu-0"]
    assert (worker[0].pid, worker[1]) == (fake.driver.pid, Path("/tmp/fqw-x")), "an elastic job's worker nodes too"
    cluster.workers.clear()
    assert (again.dashboard_port, again.record) == (2, {"uid": "uid-1"})
    assert Detached(fake.driver.pid, f"--temp-dir={fake.temp}").poll() == -1, "another process is not the head"


def test_a_record_nobody_owns_is_reaped(tmp_path: Path, fake: FakeCluster) -> None:
    path = record_path(tmp_path, "rayjobs", "default", "gone")
    _write(path, fake.record("uid-9"))
    fake.head.kill()  # the head is gone; its child (same session) and the driver (a session of its own) are not
    fake.head.wait()
    assert len(fake.members()) == 2
    RayRuntime(Store(), tmp_path).recover()
    deadline = time.monotonic() + 10
    while fake.members() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fake.members() == [] and not path.exists() and not fake.temp.exists()


def test_a_server_that_runs_no_jobs_leaves_no_cluster_running(tmp_path: Path, fake: FakeCluster) -> None:
    path = record_path(tmp_path, "rayclusters", "team", "nb")
    _write(path, fake.record("uid-1"))
    assert reap_all(tmp_path) == 1
    assert fake.members() == [] and not path.exists()


def test_a_running_job_whose_cluster_does_not_answer_fails_as_lost(tmp_path: Path, fake: FakeCluster,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reattach, "ANSWER_WAIT", 1.0)
    store = Store()
    key = Key("ray.io", "rayjobs", "default", "broken")
    job = store.create(key, _job({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "jobId": "broken-1"}))
    path = record_path(tmp_path, "rayjobs", "default", "broken")
    _write(path, fake.record(job["metadata"]["uid"], submission="broken-1", header_len=0, deadline=time.time() + 60))
    runtime = RayRuntime(store, tmp_path)
    runtime.recover()
    assert fake.members() == [] and not path.exists(), "a head that does not answer is killed"
    run = runtime.runs["default/broken"]
    assert not run.started, "nothing runs before the controllers do"
    runtime.resume()
    assert run.done.wait(10)
    status = store.get(key)["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["reason"]) == ("Failed", "FAILED",
                                                                                      "RayClusterLost")
    assert status["failed"] == 1 and "lost while the server was down" in status["message"]
    assert "lost while the server was down" in runtime.log_path("default", "broken").read_text()
    events = store.list_objects("", "events", "default")[0]
    assert [e["reason"] for e in events if e["reason"] == "RayClusterLost"] == ["RayClusterLost"]


def test_what_a_restart_does_with_jobs_without_a_live_cluster(tmp_path: Path, fake: FakeCluster) -> None:
    store = Store()
    queued = _job({})
    queued["spec"]["suspend"] = True
    store.create(Key("ray.io", "rayjobs", "default", "broken"), queued)
    done = _job({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"})
    done["metadata"].update(name="done", uid="uid-2")
    done["spec"]["shutdownAfterJobFinishes"] = False
    done = store.create(Key("ray.io", "rayjobs", "default", "done"), done)
    fake.head.kill()
    fake.head.wait()
    _write(record_path(tmp_path, "rayjobs", "default", "done"), fake.record(done["metadata"]["uid"],
                                                                           submission="done-1"))
    stopped = _job({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "failed": 1}, backoff=2)
    stopped["metadata"].update(name="stopped", uid="uid-3")
    store.create(Key("ray.io", "rayjobs", "default", "stopped"), stopped)  # its server stopped cleanly: no record
    runtime = RayRuntime(store, tmp_path)
    runtime.recover()
    assert list(runtime.runs) == ["default/stopped"] and fake.members() == []
    again = runtime.runs["default/stopped"]
    assert again.resume is None and again.cluster is None and not again.started, "it runs again from the start"
    runtime.stop_all()


DRIVER_ENDED_MS = 1_796_000_000_123
"""When the fake dashboard's job ended (milliseconds since the epoch): 2026-11-30T00:53:20Z."""


class _Dashboard(BaseHTTPRequestHandler):
    """A Ray dashboard's Jobs API that knows one job, finished: ``broken-1``, which printed two lines."""

    def do_GET(self) -> None:
        body = {"/api/version": {"version": "fake"},
                "/api/jobs/broken-1": {"status": "SUCCEEDED", "message": "done", "end_time": DRIVER_ENDED_MS},
                "/api/jobs/broken-1/logs": {"logs": "tick 0\nall done\n"}}.get(self.path)
        data = json.dumps(body).encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: Any) -> None:
        return


@pytest.fixture
def dashboard() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Dashboard)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_a_running_job_is_followed_again_and_its_cluster_torn_down_at_the_end(tmp_path: Path, fake: FakeCluster,
                                                                             dashboard: int,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store()
    at_teardown: list[dict[str, Any]] = []
    teardown = LocalRayCluster.stop

    def stop(cluster: LocalRayCluster, grace: float = 5.0) -> None:
        at_teardown.append(dict(store.get(key).get("status") or {}))
        teardown(cluster, grace)

    monkeypatch.setattr(LocalRayCluster, "stop", stop)
    key = Key("ray.io", "rayjobs", "default", "broken")
    job = store.create(key, _job({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "jobId": "broken-1"}))
    runtime = RayRuntime(store, tmp_path)
    log = runtime.log_path("default", "broken")
    log.parent.mkdir(parents=True)
    header = "flexq: starting a Ray cluster: CPU only\n"
    log.write_text(header + "tick 0\n")
    path = record_path(tmp_path, "rayjobs", "default", "broken")
    _write(path, fake.record(job["metadata"]["uid"], dashboard, submission="broken-1", header_len=len(header),
                             deadline=time.time() + 60))
    runtime.recover()
    assert runtime.dashboard_port("default", "broken") == dashboard, "the dashboard proxy reaches it again"
    runtime.resume()
    assert runtime.runs["default/broken"].done.wait(15)
    status = store.get(key)["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"], status["failed"]) == ("Complete", "SUCCEEDED", 0)
    assert status["endTime"] == "2026-11-30T00:53:20Z", "the driver's own end, not the time the server came back"
    assert [seen.get("jobStatus") for seen in at_teardown] == ["SUCCEEDED"], \
        "the end is written before the cluster is torn down (a kill during teardown finds the job finished)"
    assert log.read_text().replace("\x00flexq-end\x00", "") == (
        f"{header}flexq: the server restarted; the job's Ray cluster ran on (head pid {fake.head.pid}) and is "
        "followed again\ntick 0\nall done\nJob 'broken-1' succeeded\n" + "-" * 40 + "\n")
    assert fake.members() == [] and not path.exists(), "shutdownAfterJobFinishes: the cluster is torn down"
    events = store.list_objects("", "events", "default")[0]
    assert "RayClusterFound" in [e["reason"] for e in events]


def test_a_raycluster_is_found_again_and_reachable_by_port_forward(tmp_path: Path, fake: FakeCluster,
                                                                   dashboard: int) -> None:
    store = Store()
    obj = copy.deepcopy(CLUSTER)
    obj["spec"]["suspend"] = False
    obj["status"] = {"state": "ready", "stateTransitionTimes": {"ready": "2026-01-01T00:00:00Z"}}
    obj = store.create(Key("ray.io", "rayclusters", "team", "nb"), obj)
    path = record_path(tmp_path, "rayclusters", "team", "nb")
    _write(path, fake.record(obj["metadata"]["uid"], dashboard))
    runtime = RayRuntime(store, tmp_path)
    runtime.recover()
    runtime.resume()
    clusters = runtime.clusters

    def ready() -> dict[str, Any]:
        status: dict[str, Any] = store.get(clusters.key("team", "nb"))["status"]
        assert status["state"] == "ready" and clusters.published.get("team/nb")
        return status

    status = eventually(ready, timeout=10)
    assert status["stateTransitionTimes"]["ready"] == "2026-01-01T00:00:00Z", "ready since before the restart"
    head = next(p for p in store.list_objects("", "pods", "team")[0]
                if p["metadata"]["labels"]["ray.io/node-type"] == "head")
    assert runtime.head_ports("team", head)[8265] == dashboard
    assert fake.members(), "the cluster runs on"
    runtime.clusters.stop("team", "nb")
    assert fake.members() == [] and not path.exists()


def test_worker_nodes_added_after_a_restart_are_named_after_those_found_again() -> None:
    class Cluster:
        def __init__(self) -> None:
            self.workers: dict[str, Any] = {"cpu-1": None, "cpu-4": None}

        def add_worker(self, name: str, *_args: Any) -> None:
            assert name not in self.workers, "an existing worker node would be lost track of"
            self.workers[name] = None

    workers = ElasticWorkers({"cpu": GroupShape("cpu", 1, 0, {}, 1, 4)}, {"cpu": 3}, lambda _line: None)
    cluster = Cluster()
    workers.adopt(cluster)  # type: ignore[arg-type]
    workers.reconcile(cluster)  # type: ignore[arg-type]
    assert sorted(cluster.workers) == ["cpu-1", "cpu-4", "cpu-5"]
