"""Jobs outlive the control plane, for real: a server killed with SIGKILL while a RayJob runs is restarted on the
same state and finds the job's Ray cluster again (the job runs once, its log goes on); a cluster whose head died
meanwhile is reaped and the job retried as its backoffLimit says; a worker killed mid-job fails the attempt, and
the job is retried; a RayCluster is found again too, and reached through kubectl port-forward. No Ray process of
the test outlives it (:mod:`tests.runtime.ray_leaks`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from flexq.runtime.ray_cluster import Detached
from tests import admin
from tests.cli.test_kubectl_raycluster import SETUP, cluster
from tests.conftest import Server, free_port, start_server, stop_server
from tests.queues import queue_yaml
from tests.runtime.ray_leaks import RayProcesses
from tests.support import assert_done, cli_ok, eventually, get_rayjob

QUEUE = queue_yaml(("default", None))

POOLS = """apiVersion: flexq.dev/v1alpha1
kind: Cluster
metadata: {name: c}
---
apiVersion: flexq.dev/v1alpha1
kind: NodePool
metadata: {name: default-pool}
spec: {cluster: c, machineType: n2-standard-16, initialNodeCount: 1}
"""

CAPACITY = "cloud:\n  default-pool: {bootTime: 1s}\n"

TICKS = ("python -c \"import time; [print('tick', i, flush=True) or time.sleep(1) for i in range(%d)]; "
         "print('all done')\"")


def rayjob(name: str, entrypoint: str, backoff: int, volume: str = "") -> str:
    mount = ("            volumeMounts: [{name: code, mountPath: /app}]\n"
             f"          volumes: [{{name: code, configMap: {{name: {volume}}}}}]\n") if volume else ""
    return f"""apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: {name}
  labels: {{kueue.x-k8s.io/queue-name: q}}
spec:
  shutdownAfterJobFinishes: true
  backoffLimit: {backoff}
  entrypoint: {json.dumps(entrypoint)}
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {{}}
      template:
        spec:
          containers:
          - name: head
            image: x
            resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
{mount}"""


def _log(srv: Server, name: str) -> str:
    path = srv.home / "logs" / "rayjobs" / "default" / f"{name}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _record(srv: Server, name: str) -> dict[str, Any]:
    return dict(json.loads((srv.home / "ray" / "rayjobs" / "default" / f"{name}.json").read_text()))


def _until_log(srv: Server, name: str, text: str, timeout: float = 90) -> None:
    def shown() -> None:
        status = get_rayjob(srv, name).get("status") or {}
        assert status.get("jobDeploymentStatus") not in ("Complete", "Failed"), status
        assert text in _log(srv, name)

    eventually(shown, timeout=timeout)


def _crash(srv: Server) -> None:
    srv.process.send_signal(signal.SIGKILL)
    srv.process.wait()
    if srv.process.stderr is not None:
        srv.process.stderr.close()


def _finished(srv: Server, name: str, timeout: float = 120) -> dict[str, Any]:
    eventually(lambda: assert_done(get_rayjob(srv, name)), timeout=timeout)
    return dict(get_rayjob(srv, name)["status"])


def test_a_job_survives_a_killed_server_and_runs_once(tmp_path: Path, ray_processes: RayProcesses) -> None:
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY)
    flags = ("--runtime", "ray", "--capacity", str(capacity))
    srv = start_server(tmp_path / "home", *flags)
    again: Server | None = None
    follow: subprocess.Popen[str] | None = None
    try:
        cli_ok(srv, "apply", "-f", "-", input=POOLS + "---\n" + QUEUE.replace(
            "metadata: {name: default}", "metadata: {name: default}\nspec: {nodeLabels: "
            "{cloud.google.com/gke-nodepool: default-pool}}"))
        cli_ok(srv, "apply", "-f", "-", input=rayjob("ticker", TICKS % 20, 0))
        _until_log(srv, "ticker", "tick 2")
        head = _record(srv, "ticker")["pid"]
        assert ray_processes.count() > 3
        _crash(srv)
        time.sleep(1)
        assert Detached(head, f"--temp-dir={_record(srv, 'ticker')['temp_dir']}").poll() is None, \
            "the cluster outlives its server"
        again = start_server(srv.home, *flags)
        assert _record(again, "ticker")["pid"] == head
        # The new server finds the cluster again once its runtime has started (a moment after the API answers).
        eventually(lambda: _assert_in_status(admin.get(f"{again.url}/ui/ray/default/ticker/api/version"), 200,
                                             "the dashboard proxy reaches the cluster found again"), timeout=60)
        follow = subprocess.Popen([sys.executable, "-m", "flexq.cli.main", "logs", "-f", "rayjob/ticker"],
                                  stdout=subprocess.PIPE, text=True, env=again.env())
        status = _finished(again, "ticker")
        followed, _ = follow.communicate(timeout=30)
        follow = None
        log = cli_ok(again, "logs", "rayjob/ticker").stdout
        assert status["jobStatus"] == "SUCCEEDED" and status["failed"] == 0, log
        assert log.splitlines().count("tick 0") == 1 and log.splitlines().count("all done") == 1, "the job ran once"
        assert log.count("starting a Ray cluster") == 1 and f"ran on (head pid {head}) and is followed again" in log
        assert "tick 19" in followed and "all done" in followed, "logs -f after the restart follows to the end"
        events = admin.get(f"{again.url}/api/v1/namespaces/default/events").json()["items"]
        assert any(e["reason"] == "RayClusterFound" for e in events)
        eventually(lambda: _assert_gone(again, ray_processes), timeout=60)
        eventually(lambda: _assert_freed(again), timeout=30)
    finally:
        if follow is not None:
            follow.kill()
            follow.communicate()
        if srv.process.poll() is None:
            stop_server(srv)
        if again is not None:
            stop_server(again)


def test_a_kill_at_the_job_end_leaves_it_succeeded_once(tmp_path: Path, ray_processes: RayProcesses) -> None:
    """The server is killed the moment the job's cluster starts to go (its head exits): mid-teardown. The restarted
    server finds the job succeeded (not its cluster lost), run once, ended when the driver ended, and nothing of the
    cluster left."""
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(CAPACITY)
    flags = ("--runtime", "ray", "--capacity", str(capacity))
    srv = start_server(tmp_path / "home", *flags)
    again: Server | None = None
    try:
        cli_ok(srv, "apply", "-f", "-", input=POOLS + "---\n" + QUEUE.replace(
            "metadata: {name: default}", "metadata: {name: default}\nspec: {nodeLabels: "
            "{cloud.google.com/gke-nodepool: default-pool}}"))
        cli_ok(srv, "apply", "-f", "-", input=rayjob("ender", TICKS % 3, 1))
        _until_log(srv, "ender", "tick 0")
        record = _record(srv, "ender")
        head = Detached(record["pid"], f"--temp-dir={record['temp_dir']}")
        deadline = time.monotonic() + 120
        while head.poll() is None:
            assert time.monotonic() < deadline, _log(srv, "ender")
            time.sleep(0.02)
        _crash(srv)
        crashed = time.time()
        time.sleep(2)
        again = start_server(srv.home, *flags)
        status = _finished(again, "ender")
        log = cli_ok(again, "logs", "rayjob/ender").stdout
        assert (status["jobStatus"], status["jobDeploymentStatus"], status["failed"]) == \
            ("SUCCEEDED", "Complete", 0), log
        assert log.splitlines().count("all done") == 1 and log.count("starting a Ray cluster") == 1, "it ran once"
        ended = datetime.fromisoformat(status["endTime"]).timestamp()
        assert ended <= crashed + 1, "the end is the driver's, not the restart's"
        eventually(lambda: _assert_gone(again, ray_processes), timeout=60)
        eventually(lambda: _assert_freed(again), timeout=30)
    finally:
        if srv.process.poll() is None:
            stop_server(srv)
        if again is not None:
            stop_server(again)


def _assert_freed(srv: Server) -> None:
    cq = admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq").json()
    assert cq["status"]["reservingWorkloads"] == 0, "the finished job's quota is free"


def _assert_gone(srv: Server, procs: RayProcesses) -> None:
    assert procs.count() == 0, procs.running()
    assert not list((srv.home / "ray").glob("*/*/*.json")), "no record is left"


def test_a_head_lost_while_the_server_was_down_is_reaped_and_the_job_retried(tmp_path: Path,
                                                                            ray_processes: RayProcesses) -> None:
    srv = start_server(tmp_path / "home", "--runtime", "ray")
    again: Server | None = None
    try:
        cli_ok(srv, "apply", "-f", "-", input=QUEUE)
        cli_ok(srv, "apply", "-f", "-", input=rayjob("ticker", TICKS % 6, 1))
        _until_log(srv, "ticker", "tick 1")
        record = _record(srv, "ticker")
        running = ray_processes.running()
        _crash(srv)
        # The head dies too: its GCS server is killed, and `ray start` takes the rest of the node down with it.
        gcs = [pid for pid, command in running.items() if "gcs_server" in command and record["temp_dir"] in command]
        assert len(gcs) == 1
        os.kill(gcs[0], signal.SIGKILL)
        head = Detached(record["pid"], f"--temp-dir={record['temp_dir']}")
        eventually(lambda: _assert_exited(head), timeout=30)
        again = start_server(srv.home, "--runtime", "ray")
        status = _finished(again, "ticker")
        log = cli_ok(again, "logs", "rayjob/ticker").stdout
        assert status["jobStatus"] == "SUCCEEDED", log
        assert (status["failed"], status["succeeded"]) == (1, 1), "the loss counts a failure; the retry succeeds"
        assert "lost while the server was down" in log and "retrying, attempt 2 of 2" in log
        assert log.splitlines().count("all done") == 1 and log.count("starting a Ray cluster") == 2
        events = admin.get(f"{again.url}/api/v1/namespaces/default/events").json()["items"]
        assert [e["type"] for e in events if e["reason"] == "RayClusterLost"] == ["Warning"]
        eventually(lambda: _assert_gone(again, ray_processes), timeout=60)
    finally:
        if srv.process.poll() is None:
            stop_server(srv)
        if again is not None:
            stop_server(again)


def _assert_exited(head: Detached) -> None:
    assert head.poll() is not None


TRAINER = """import os, time, ray
ray.init()


@ray.remote
class Trainer:
    def train(self, steps):
        for i in range(steps):
            print('step', i, 'worker', os.getpid(), flush=True)
            time.sleep(1)
        return 'trained'


print(ray.get(Trainer.remote().train.remote(6)))
"""


@pytest.mark.long
def test_a_worker_or_raylet_killed_mid_job_fails_the_attempt_and_the_job_is_retried(
        tmp_path: Path, ray_processes: RayProcesses) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    srv = start_server(tmp_path / "home", "--runtime", "ray")
    try:
        cli_ok(srv, "apply", "-f", "-", input=QUEUE)
        cli_ok(srv, "create", "configmap", "code", f"--from-file={script}")
        cli_ok(srv, "apply", "-f", "-", input=rayjob("trainer", "python /app/trainer.py", 4, volume="code"))
        # The training actor's worker process is killed in the first attempt that trains, the node's raylet in the
        # next one (each attempt a new cluster). An attempt that a loaded machine loses on its own before that is
        # retried like any other: the attempts are counted from the log.
        killed_worker, worker = _training(srv, "trainer", after=0)
        assert ray_processes.count() > 3
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)
        killed_raylet, _ = _training(srv, "trainer", after=killed_worker)
        temp = _record(srv, "trainer")["temp_dir"]
        raylets = [pid for pid, command in ray_processes.running().items()
                   if command.split()[0].endswith("/raylet") and f"--temp_dir={temp}" in command]
        assert len(raylets) == 1
        os.kill(raylets[0], signal.SIGKILL)
        status = _finished(srv, "trainer", timeout=200)
        log = cli_ok(srv, "logs", "rayjob/trainer").stdout
        attempts = _attempts(log)
        assert status["jobStatus"] == "SUCCEEDED", log
        assert (status["failed"], status["succeeded"]) == (len(attempts) - 1, 1), "every attempt but the last failed"
        assert killed_worker < killed_raylet < len(attempts), log
        first, second, last = attempts[killed_worker - 1], attempts[killed_raylet - 1], attempts[-1]
        assert ("the Ray cluster's head exited while the job ran (Ray's processes that ended: raylet (exit code -9"
                in second.splitlines()[-1]), second[-2000:]
        assert "step 1 worker" in first and "trained" not in first
        assert "step 1 worker" in second and "trained" not in second and "step 5 worker" not in second
        assert "step 5 worker" in last and "trained" in last
        eventually(lambda: _assert_gone(srv, ray_processes), timeout=60)
    finally:
        stop_server(srv)


def _attempts(log: str) -> list[str]:
    """A RayJob's log cut into its attempts, each but the last ending with the line that says why it failed and
    that it is retried."""
    attempts = [""]
    for line in log.splitlines(keepends=True):
        attempts[-1] += line
        if "; retrying, attempt " in line:
            attempts.append("")
    return attempts


def _training(srv: Server, name: str, after: int) -> tuple[int, int]:
    """Once an attempt after the ``after``-th has trained a step: its number and its training worker's pid."""
    def training() -> tuple[int, int]:
        status = get_rayjob(srv, name).get("status") or {}
        assert status.get("jobDeploymentStatus") not in ("Complete", "Failed"), status
        attempts = _attempts(_log(srv, name))
        step = re.search(r"step 1 worker (\d+)", attempts[-1])
        assert len(attempts) > after and step is not None
        return len(attempts), int(step[1])

    return eventually(training, timeout=120)


def test_a_raycluster_survives_a_killed_server_and_is_reached_again(tmp_path: Path,
                                                                    ray_processes: RayProcesses) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    srv = start_server(tmp_path / "home", "--runtime", "ray")
    again: Server | None = None
    forward: subprocess.Popen[str] | None = None
    url = "/apis/ray.io/v1/namespaces/default/rayclusters/notebook"
    try:
        cli_ok(srv, "apply", "-f", "-", input=SETUP + "---\n" + cluster("notebook", 1))
        eventually(lambda: _assert_state(srv, url, "ready"), timeout=90)
        record = json.loads((srv.home / "ray" / "rayclusters" / "default" / "notebook.json").read_text())
        assert ray_processes.count() > 3
        _crash(srv)
        again = start_server(srv.home, "--runtime", "ray")
        assert json.loads((srv.home / "ray" / "rayclusters" / "default" / "notebook.json").read_text()) == record
        eventually(lambda: _assert_state(again, url, "ready"), timeout=30)
        config = tmp_path / "kubeconfig"
        cli_ok(again, "kubeconfig", "--write", str(config))
        local = free_port()
        forward = subprocess.Popen([kubectl, "port-forward", "service/notebook-head-svc", f"{local}:8265"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**again.env(), "KUBECONFIG": str(config), "HOME": str(tmp_path)})
        answer = eventually(lambda: _assert_answers(f"http://127.0.0.1:{local}/api/version"), timeout=30)
        assert "ray_version" in answer, "the cluster found again is reached through a port-forward"
        events = admin.get(f"{again.url}/api/v1/namespaces/default/events").json()["items"]
        assert any(e["reason"] == "RayClusterFound" for e in events)
        assert admin.delete(again.url + url).status_code == 200
        eventually(lambda: _assert_gone(again, ray_processes), timeout=60)
    finally:
        if forward is not None:
            forward.terminate()
            forward.communicate(timeout=30)
        if srv.process.poll() is None:
            stop_server(srv)
        if again is not None:
            stop_server(again)


def _assert_state(srv: Server, url: str, state: str) -> None:
    assert (admin.get(srv.url + url).json().get("status") or {}).get("state") == state


def _assert_answers(url: str) -> str:
    try:
        response = admin.get(url, timeout=10)
    except httpx.HTTPError as exc:
        raise AssertionError(str(exc)) from None
    assert response.status_code == 200, response.text
    return response.text


def _assert_in_status(response: httpx.Response, code: int, what: str) -> None:
    assert response.status_code == code, f"{what}: {response.status_code} {response.text[:200]}"
