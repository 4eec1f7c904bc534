"""The guide's cluster.sh, command by command as the file writes them, with the real gcloud and kubectl.

The environment is what `flexq env` prints plus the guide's env.sh (run as written); the server runs the jobs on
real Ray with the emulated capacity of examples/guide/capacity-demo.yaml (DWS a little slower), and serves HTTPS so
that kubectl uses the verified context `get-credentials` writes. Between two commands the test waits as a person
would: for job 1 to run before the port-forward (the RayJobs shut their Ray clusters down when they finish), for
both jobs to finish before reading the log. This is the guide's run of the suite (:mod:`tests.runtime.guide_run`):
from the two-job loop to the log, the dashboard follows the jobs in a browser where one runs; before the cluster is
deleted, the run is checked as the guide's run is everywhere.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import admin
from tests.conftest import GUIDE, Server, free_port, free_port_pair, start_server, stop_server
from tests.runtime import guide_run
from tests.runtime.ray_leaks import RayProcesses
from tests.support import eventually_value

pytestmark = pytest.mark.skipif(not guide_run.CLUSTER_SH, reason=f"needs {', '.join(guide_run.CLIENTS)}")

SKIPPED = ("helm install kueue",)
"""Commands of cluster.sh that cannot run here: helm needs the internet, and Kueue is built into flexq."""


def shell_commands(path: Path) -> list[str]:
    """A script's commands in order: comments and blank lines dropped, continued lines and a for loop kept whole."""
    commands: list[str] = []
    pending: list[str] = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        pending.append(line)
        if stripped.endswith("\\") or (pending[0].startswith("for ") and stripped != "done"):
            continue
        commands.append("\n".join(pending))
        pending = []
    assert not pending, f"{path} ends inside a command"
    return commands


def _state(server: Server) -> str:
    """What the server shows, for a failure's message: the RayJobs' and Workloads' statuses, the nodes."""
    def items(path: str) -> list[dict[str, Any]]:
        return list(admin.get(server.url + path, timeout=10).json().get("items") or [])

    jobs = [(j["metadata"]["name"], {k: v for k, v in (j.get("status") or {}).items() if k != "trainingMetrics"})
            for j in items("/apis/ray.io/v1/namespaces/default/rayjobs")]
    workloads = [(w["metadata"]["name"], [(c["type"], c["status"], c.get("message", ""))
                                          for c in (w.get("status") or {}).get("conditions") or []])
                 for w in items("/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")]
    nodes = [n["metadata"]["name"] for n in items("/api/v1/nodes")]
    return f"rayjobs: {jobs}\nworkloads: {workloads}\nnodes: {nodes}"


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.fixture
def server(tmp_path: Path, ray_processes: RayProcesses) -> Iterator[Server]:
    # As a user starts it: no TLS or auth flags (HTTPS on --port + 1, its CA under FLEXQ_HOME, anonymous mode). The
    # server's Ray processes carry ray_processes' tag: any left behind fail the test (and are killed with it).
    srv = start_server(tmp_path / "home", "--runtime", "ray", "--capacity", str(guide_run.capacity(tmp_path)),
                       port=free_port_pair())
    try:
        yield srv
    finally:
        stop_server(srv)


@pytest.mark.long
@pytest.mark.timeout(1200)
def test_cluster_sh_runs_unchanged_with_real_gcloud_and_kubectl(server: Server, tmp_path: Path,
                                                                ray_processes: RayProcesses) -> None:
    env = server.tools_env(tmp_path)
    sourced = subprocess.run(["bash", "-c", f"set -e; source {GUIDE / 'env.sh'}; env -0"], capture_output=True,
                             text=True, env=env, cwd=GUIDE, timeout=120, check=False)
    assert sourced.returncode == 0, sourced.stderr
    env = dict(item.split("=", 1) for item in sourced.stdout.split("\0") if "=" in item)
    assert env["PROJECT_ID"] == "demo" and env["PROJECT_NUMBER"].isdigit(), "env.sh ran against flexq"

    def sh(command: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd=GUIDE,
                              timeout=timeout, check=False)

    def job(name: str) -> dict[str, Any]:
        got = admin.get(f"{server.url}/apis/ray.io/v1/namespaces/default/rayjobs/{name}", timeout=10).json()
        return dict(got.get("status") or {}) if got.get("kind") == "RayJob" else {}

    def finished(name: str) -> bool:
        return job(name).get("jobDeploymentStatus") in ("Complete", "Failed")

    script = shell_commands(GUIDE / "cluster.sh")
    assert [c for c in script if c.startswith(SKIPPED)] == [c for c in script if c.startswith("helm ")]
    commands = [c for c in script if not c.startswith(SKIPPED)]
    loop = next(i for i, c in enumerate(commands) if c.startswith("for i in 1 2"))
    delete = next(i for i, c in enumerate(commands) if c.startswith("gcloud container clusters delete"))
    done: list[str] = []

    def run(command: str) -> None:
        if command.startswith("kubectl port-forward"):
            _port_forward(command, env, job, finished, lambda: _state(server))
        elif command.startswith("kubectl logs"):
            for name in guide_run.JOBS:
                eventually_value(lambda n=name: finished(n), 600, 1.0, what=f"{name} to finish",
                                 state=lambda: _state(server))
                log = sh(f"kubectl logs job/{name}").stdout
                assert job(name)["jobStatus"] == "SUCCEEDED", f"{job(name).get('message')}\n{log[-4000:]}"
            logged = sh(command)
            assert logged.returncode == 0, logged.stderr
            lines = logged.stdout.rstrip().splitlines()
            assert "Training Complete!" in logged.stdout
            assert any(line.startswith("Job 'rayjob-tpu-v6e-dws-1-") and line.endswith("' succeeded")
                       for line in lines[-3:]), lines[-5:]
        else:
            result = sh(command)
            assert result.returncode == 0, f"{command}\n{result.stderr}"
            if "get(config.flexStart)" in command:
                assert result.stdout == "True\n", "the flex-start check"
            if command.startswith("for i in 1 2"):
                assert result.stdout.splitlines() == [
                    'rayjob.ray.io/rayjob-tpu-v6e-dws-1 created', "Submitted Job 1",
                    'rayjob.ray.io/rayjob-tpu-v6e-dws-2 created', "Submitted Job 2"]
        done.append(" ".join(command.split()[:4]))

    def jobs_to_their_log() -> None:  # the two-job loop, the port-forward, the logs
        for command in commands[loop:delete]:
            run(command)

    for command in commands[:loop]:
        run(command)
    guide_run.run(server, ray_processes, jobs_to_their_log)
    for command in commands[delete:]:
        run(command)
    assert done == ["gcloud container clusters create", "gcloud container clusters get-credentials",
                    "gcloud container node-pools create", "gcloud container node-pools create",
                    "gcloud container node-pools describe", "envsubst < dws-tpu-queue.yaml |",
                    "kubectl create configmap jax-train-script", "for i in 1",
                    "kubectl port-forward service/rayjob-tpu-v6e-dws-1-head-svc 8265:8265",
                    "kubectl logs job/rayjob-tpu-v6e-dws-1", "gcloud container clusters delete"], "all but helm ran"
    # The cluster delete took everything with it.
    listed = sh("gcloud container clusters list --format='value(name)'")
    assert listed.returncode == 0 and listed.stdout == "", listed.stderr
    eventually_value(lambda: sh("kubectl get nodes,nodepools -o name").stdout == "", 120, 1.0, what="the nodes to go",
                     state=lambda: _state(server))
    pools = sh("gcloud container node-pools list --cluster=tpu-cluster --location=us-east5-b")
    assert pools.returncode != 0 and "404" in pools.stderr, "the cluster is gone"
    eventually_value(lambda: not ray_processes.count(), 60, 1.0, what="every Ray process to stop",
                     state=lambda: str(ray_processes.running()))


def _flexq_port_forward(env: dict[str, str], about: dict[str, Any]) -> None:
    """flexq's own port-forward reaches the same dashboard, from the RayJob's name, on a free local port."""
    forward = subprocess.Popen([sys.executable, "-m", "flexq.cli.main", "port-forward", "rayjob/rayjob-tpu-v6e-dws-1",
                                ":8265"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert forward.stdout is not None
        first = forward.stdout.readline()
        assert first.startswith("Forwarding from 127.0.0.1:") and first.rstrip().endswith(" -> 8265"), \
            first + forward.communicate(timeout=10)[1]
        port = int(first.split(":")[1].split()[0])
        assert admin.get(f"http://127.0.0.1:{port}/api/version", timeout=30).json() == about
    finally:
        forward.terminate()
        forward.communicate(timeout=30)


def _port_forward(command: str, env: dict[str, str], job: Callable[[str], dict[str, Any]],
                  finished: Callable[[str], bool], state: Callable[[], str]) -> None:
    """Run the port-forward while job 1's Ray cluster is up; its dashboard answers through it."""
    assert command.endswith(" &"), "cluster.sh runs it in the background"

    def running() -> bool:
        if finished("rayjob-tpu-v6e-dws-1"):  # no use waiting: a failure at once (not retried, as an assert is)
            pytest.fail(f"job 1 ended before it was seen running; {state()}")
        return job("rayjob-tpu-v6e-dws-1").get("jobDeploymentStatus") == "Running"

    eventually_value(running, 600, 1.0, what="rayjob-tpu-v6e-dws-1 to run", state=state)
    local = 8265
    if not _port_is_free(local):  # someone else's on this machine: only then is the local port changed
        local = free_port()
        command = command.replace("8265:8265", f"{local}:8265")
    forward = subprocess.Popen(["bash", "-c", "exec " + command.removesuffix(" &")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, cwd=GUIDE)
    try:
        def answered() -> dict[str, Any] | None:
            assert forward.poll() is None, f"{forward.communicate()}\n{state()}"
            try:
                response = admin.get(f"http://127.0.0.1:{local}/api/version", timeout=10)
            except httpx.HTTPError:
                return None
            return dict(response.json()) if response.status_code == 200 else None

        about = eventually_value(answered, 60, 1.0, what="the dashboard through the port-forward")
        assert about["ray_version"] == version("ray")
        submissions = [j.get("submission_id") for j in
                       admin.get(f"http://127.0.0.1:{local}/api/jobs/", timeout=30).json()]
        assert submissions == [job("rayjob-tpu-v6e-dws-1")["jobId"]], "job 1's own Ray cluster"
        _flexq_port_forward(env, about)
    finally:
        forward.terminate()
        out, err = forward.communicate(timeout=30)
    assert f"Forwarding from 127.0.0.1:{local} -> 8265" in out, err
    assert "Handling connection for" in out and "error" not in err.lower(), err
