"""The execution path: the guide's job on a warm Ray cluster, through flexq against plain ``ray job submit``.

    python bench/execution_bench.py [--runs 5] [--out DIR]

``flexq server --runtime ray`` runs in a process of its own (a fresh FLEXQ_HOME, a free loopback port), with the
guide's queues and its ``jax-train-script`` ConfigMap. A RayCluster ``warm`` with the guide's RayJob's cluster
(its head and its v6e 4x4 TPU slice, emulated here; fixed size) is admitted through the guide's LocalQueue and
kept up. Then, alternately, ``--runs`` times each:

- **flexq**: a RayJob with the guide's entrypoint and runtime environment and ``clusterSelector: {ray.io/cluster:
  warm}`` is created through the Kubernetes API; the clock stops when its log, read through the API as
  ``kubectl logs`` reads it (polled every 0.2 s), says ``Training Complete!``;
- **plain**: ``ray job submit --working-dir`` of the same script, with the same environment variables, to the
  same cluster's dashboard; the clock stops when its output (which follows the job's log) says it.

Each time runs from the submission to that line. The report (``bench/results/execution.json`` and ``.md``) gives
every time, each side's median and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from flexq.auth import read_token

HERE = Path(__file__).parent
GUIDE = HERE.parent / "examples" / "guide"
GUIDE_ENV = {"ONDEMAND_NODEPOOL": "on-demand-pool", "DWS_NODEPOOL": "dws-pool"}
DONE = "Training Complete!"
ENV_VARS = {"RAY_TRAIN_ENABLE_PRINT_PATCH": "0", "RAY_DEDUP_LOGS": "0", "RAY_COLOR_PREFIX": "0"}
"""The environment flexq gives a job's driver (clean logs), given to the plain submission too."""


def guide(name: str, **env: str) -> str:
    text = (GUIDE / name).read_text()
    for key, value in {**GUIDE_ENV, **env}.items():
        text = text.replace("${" + key + "}", value)
    return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def warm_cluster() -> dict[str, Any]:
    """The guide's RayJob's cluster as a RayCluster of its own, of a fixed size, queued as the guide's job is."""
    job = yaml.safe_load(guide("rayjob-tpu-v6e-dws.yaml", JOB_ID="0"))
    spec = job["spec"]["rayClusterSpec"]
    spec.pop("enableInTreeAutoscaling", None)
    for group in spec["workerGroupSpecs"]:
        group["minReplicas"] = group["maxReplicas"] = group["replicas"]
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "warm", "namespace": "default", "labels": dict(job["metadata"]["labels"])},
            "spec": spec}


def selecting_job(name: str) -> dict[str, Any]:
    """The guide's RayJob (entrypoint, runtime environment) on the warm cluster."""
    job = yaml.safe_load(guide("rayjob-tpu-v6e-dws.yaml", JOB_ID="0"))
    spec = {key: job["spec"][key] for key in ("entrypoint", "runtimeEnvYAML")}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {**spec, "clusterSelector": {"ray.io/cluster": "warm"}}}


class Server:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        home.mkdir(parents=True)
        self.log = open(home / "server.log", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen([sys.executable, "-m", "flexq.cli.main", "server", "--runtime", "ray",
                                         "--port", str(self.port), "--home", str(home)],
                                        stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)
        wait_for(lambda: self._up(), 60, "the server to start")

    def _up(self) -> bool:
        if self.process.poll() is not None:
            raise SystemExit(f"the server exited: {(self.home / 'server.log').read_text()[-2000:]}")
        try:
            if self.client.get("/healthz").status_code != 200:
                return False
        except httpx.HTTPError:
            return False
        self.client.headers["Authorization"] = f"Bearer {read_token(self.home)}"  # the administrator, as the CLI
        return True

    def apply(self, text: str) -> None:
        for doc in yaml.safe_load_all(text):
            if doc:
                self.create(doc)

    def create(self, obj: dict[str, Any]) -> None:
        kind, version = obj["kind"], obj["apiVersion"]
        plural = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
                  "AdmissionCheck": "admissionchecks", "ProvisioningRequestConfig": "provisioningrequestconfigs",
                  "RayCluster": "rayclusters", "RayJob": "rayjobs", "ConfigMap": "configmaps"}[kind]
        namespaced = kind in ("LocalQueue", "RayCluster", "RayJob", "ConfigMap")
        root = f"/apis/{version}" if "/" in version else f"/api/{version}"
        ns = f"/namespaces/{obj['metadata'].get('namespace', 'default')}" if namespaced else ""
        response = self.client.post(f"{root}{ns}/{plural}", json=obj)
        if response.status_code >= 300:
            raise SystemExit(f"creating {kind} {obj['metadata']['name']}: {response.text}")

    def log_of(self, job: str) -> str:
        """The job's log as ``kubectl logs job/<job>`` reads it: its submitter pod's log."""
        pods = self.client.get("/api/v1/namespaces/default/pods", params={"labelSelector": f"job-name={job}"})
        items = pods.json().get("items") or []
        if not items:
            return ""
        response = self.client.get(f"/api/v1/namespaces/default/pods/{items[0]['metadata']['name']}/log")
        return response.text if response.status_code == 200 else ""

    def stop(self) -> None:
        self.client.close()
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()


def wait_for(check: Any, timeout: float, what: str, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")


def through_flexq(server: Server, name: str) -> float:
    start = time.monotonic()
    server.create(selecting_job(name))

    def done() -> bool:
        status = server.client.get(f"/apis/ray.io/v1/namespaces/default/rayjobs/{name}").json().get("status") or {}
        if status.get("jobDeploymentStatus") == "Failed":
            raise SystemExit(f"RayJob {name} failed: {status}\n{server.log_of(name)[-3000:]}")
        return DONE in server.log_of(name)

    wait_for(done, 600, f"RayJob {name} to say {DONE!r}")
    return time.monotonic() - start


def plain(address: str, workdir: Path) -> float:
    ray = Path(sys.executable).parent / "ray"
    start = time.monotonic()
    proc = subprocess.Popen([str(ray), "job", "submit", "--address", address, "--working-dir", str(workdir),
                             "--runtime-env-json", json.dumps({"env_vars": ENV_VARS}), "--", "python", "train.py"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen = ""
    for line in proc.stdout:
        seen += line
        if DONE in line:
            elapsed = time.monotonic() - start
            proc.wait(timeout=120)
            return elapsed
    proc.wait()
    raise SystemExit(f"ray job submit ended without {DONE!r}:\n{seen[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each side (default 5)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="flexq-exec-"))
    server = Server(base / "home")
    try:
        server.apply(guide("dws-tpu-queue.yaml"))
        server.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "jax-train-script"},
                       "data": {"train.py": (GUIDE / "train.py").read_text()}})
        t0 = time.monotonic()
        server.create(warm_cluster())

        def ready() -> bool:
            status = server.client.get("/apis/ray.io/v1/namespaces/default/rayclusters/warm").json().get("status")
            return (status or {}).get("state") == "ready"

        wait_for(ready, 300, "RayCluster warm to be ready")
        warmup = time.monotonic() - t0
        record = json.loads((base / "home" / "ray" / "rayclusters" / "default" / "warm.json").read_text())
        address = f"http://127.0.0.1:{record['dashboard_port']}"
        workdir = base / "script"
        workdir.mkdir()
        shutil.copy(GUIDE / "train.py", workdir / "train.py")
        times: dict[str, list[float]] = {"flexq": [], "plain": []}
        for i in range(args.runs):
            for side in (("flexq", "plain") if i % 2 == 0 else ("plain", "flexq")):
                took = through_flexq(server, f"probe-{i}") if side == "flexq" else plain(address, workdir)
                times[side].append(round(took, 2))
                print(f"run {i + 1} {side}: {took:.2f} s", flush=True)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    medians = {side: statistics.median(values) for side, values in times.items()}
    result = {"runs": args.runs, "times_s": times, "median_s": medians,
              "ratio": round(medians["flexq"] / medians["plain"], 3), "cluster_ready_s": round(warmup, 1),
              "load_average": os.getloadavg()[0]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "execution.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "execution.md").write_text(
        f"# The guide's job on a warm Ray cluster ({args.runs} runs each, alternated)\n\n"
        "| | median s | runs s |\n|---|---|---|\n"
        + "".join(f"| {side} | {medians[side]:.2f} | {', '.join(f'{t:.2f}' for t in times[side])} |\n"
                  for side in ("flexq", "plain"))
        + f"\nRatio of the medians: **{result['ratio']}** (target 1.2). The cluster was ready "
          f"{result['cluster_ready_s']} s after it was created.\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
