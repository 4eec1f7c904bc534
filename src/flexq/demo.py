"""``make demo``: the guide's flow end to end against a fresh flexq server.

Starts ``flexq server`` on a free loopback port with its state under ``.flexq/demo``, then runs the
guide's own commands (``envsubst < … | flexq apply -f -``, the ConfigMap, the two-job loop), shows the
queues and jobs with flexq and, where it is installed, with the real kubectl, and stops the server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from flexq.auth import read_token
from flexq.config import local_socket, unix_address

__all__ = ["main"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _guide_dir() -> Path:
    for candidate in (Path(__file__).resolve().parents[2] / "examples" / "guide", Path.cwd() / "examples" / "guide"):
        if (candidate / "dws-tpu-queue.yaml").exists():
            return candidate
    raise SystemExit("error: examples/guide not found; run `make demo` from the flexq checkout")


def _run(command: str, env: dict[str, str], cwd: Path) -> None:
    print(f"\n$ {command}", flush=True)
    result = subprocess.run(command, shell=True, env=env, cwd=cwd, check=False)
    if result.returncode != 0:
        raise SystemExit(f"error: the step failed with exit code {result.returncode}: {command}")


def _wait_ready(url: str, server: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("error: flexq server exited during start-up")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("error: flexq server did not become ready in time")


def _api(url: str, home: Path) -> httpx.Client:
    """The server's API as its administrator (the token flexq's CLI presents, from ``home/auth/admin.token``),
    through the server's socket, as the CLI reaches it."""
    address = unix_address(local_socket(home))
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {read_token(home)}"}, timeout=10,
                        transport=httpx.HTTPTransport(uds=address) if address is not None else None)


def _wait_for_jobs(http: httpx.Client, names: tuple[str, ...], deadline: float) -> None:
    while time.monotonic() < deadline:
        states = []
        for name in names:
            job = http.get(f"/apis/ray.io/v1/namespaces/default/rayjobs/{name}").json()
            states.append((job.get("status") or {}).get("jobDeploymentStatus"))
        if all(s in ("Complete", "Failed") for s in states):
            return
        time.sleep(3)
    raise SystemExit("error: the jobs did not finish in time")


def _summary(http: httpx.Client) -> None:
    from datetime import datetime

    def at(text: str) -> float:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    workloads = http.get("/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads").json()
    events = http.get("/api/v1/namespaces/default/events").json()["items"]
    print("\nSummary")
    print(f"{'JOB':<22} {'RESULT':<10} {'RAN ON':<16} {'WAITED':>7} {'FINAL LOSS':>12}")
    for wl in sorted(workloads["items"], key=lambda w: w["metadata"]["ownerReferences"][0]["name"]):
        name = wl["metadata"]["ownerReferences"][0]["name"]
        job = http.get(f"/apis/ray.io/v1/namespaces/default/rayjobs/{name}").json()
        status = job.get("status") or {}
        nodes = [e["message"] for e in events if e["reason"] == "Started" and e["involvedObject"]["name"] ==
                 wl["metadata"]["name"]]
        pools = sorted({p for p in ("on-demand-pool", "dws-pool") if any(p in m for m in nodes)}) or ["?"]
        started = next((at(e["firstTimestamp"]) for e in events if e["reason"] == "Started" and
                        e["involvedObject"]["name"] == wl["metadata"]["name"]), None)
        waited = f"{started - at(job['metadata']['creationTimestamp']):.0f}s" if started else "?"
        loss = (status.get("trainingMetrics") or {}).get("loss")
        print(f"{name:<22} {status.get('jobStatus', '?'):<10} {','.join(pools):<16} {waited:>7} "
              f"{loss if loss is None else format(loss, '.2e'):>12}")


def main() -> None:
    guide = _guide_dir()
    home = Path(".flexq/demo").resolve()
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = _environment(url, home)
    print(f"Starting flexq server on {url} (state in {home})", flush=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "flexq.cli.main", "server", "--port", str(port), "--tls-port", "0", "--home", str(home),
         "--capacity", str(guide / "capacity-demo.yaml")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_ready(url, server, time.monotonic() + 30)
        _administrator(env, guide)
        _developer(env, guide)
        with _api(url, home) as http:
            _outcome(http, env, guide)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _environment(url: str, home: Path) -> dict[str, str]:
    """The guide's scripts' environment: this interpreter's flexq first on PATH, the server, the pools' names."""
    bindir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "FLEXQ_SERVER": url,
        "FLEXQ_HOME": str(home),
        "ONDEMAND_NODEPOOL": "on-demand-pool",
        "DWS_NODEPOOL": "dws-pool",
        "KUBECONFIG": str(home / "kubeconfig"),
    }


def _administrator(env: dict[str, str], guide: Path) -> None:
    """The administrator's steps (cluster.sh): the cluster and its two node pools."""
    print("The administrator's steps (cluster.sh), with `flexq container` for `gcloud container`; the emulated "
          "cloud has one 4x4 slice of Plan A and DWS answers in 8 seconds (capacity-demo.yaml).")
    _run("flexq container clusters create tpu-cluster --cluster-version=1.34 --machine-type=n2-standard-16 "
         "--location=us-east5-b --enable-image-streaming --addons=RayOperator --project=demo", env, guide)
    pool_flags = ("--cluster=tpu-cluster --location=us-east5-b --machine-type=ct6e-standard-4t --tpu-topology=4x4 "
                  "--reservation-affinity=none --enable-autoscaling")
    _run(f"flexq container node-pools create on-demand-pool {pool_flags} --num-nodes=0 --min-nodes=0 "
         "--max-nodes=4", env, guide)
    _run(f"flexq container node-pools create dws-pool {pool_flags} --enable-queued-provisioning --flex-start "
         "--num-nodes=0 --min-nodes=0 --max-nodes=4", env, guide)
    _run('flexq container node-pools describe dws-pool --cluster=tpu-cluster --location=us-east5-b '
         '--format="get(config.flexStart)"', env, guide)


def _developer(env: dict[str, str], guide: Path) -> None:
    """The developer's steps: the queues, the training script, two RayJobs."""
    have_envsubst = shutil.which("envsubst") is not None
    if have_envsubst:
        _run("envsubst < dws-tpu-queue.yaml | flexq apply -f -", env, guide)
    else:
        _run("flexq apply -f dws-tpu-queue.yaml --env ONDEMAND_NODEPOOL=on-demand-pool "
             "--env DWS_NODEPOOL=dws-pool", env, guide)
    _run("flexq create configmap jax-train-script --from-file=train.py", env, guide)
    for job_id in (1, 2):
        if have_envsubst:
            _run(f"export JOB_ID={job_id}; envsubst < rayjob-tpu-v6e-dws.yaml | flexq apply -f -", env, guide)
        else:
            _run(f"flexq apply -f rayjob-tpu-v6e-dws.yaml --env JOB_ID={job_id}", env, guide)
        print(f"Submitted Job {job_id}")
    time.sleep(2)  # the queue controller places both jobs; Plan A's nodes boot
    _run("flexq get workloads,provisioningrequests,nodes", env, guide)
    print("\nEach job races both flavors (see its variants above). Job 1 takes Plan A (on-demand) as soon as "
          "its nodes are up, and its DWS request is then withdrawn at no cost. Job 2 finds Plan A busy and "
          "waits on Plan B (dws) for its ProvisioningRequest, ready to take Plan A if it frees first. Each job "
          "trains the unmodified train.py on a Ray cluster of its own, with its TPU slice emulated on this CPU.")


def _outcome(http: httpx.Client, env: dict[str, str], guide: Path) -> None:
    """Both jobs to their end, the pools back to zero, then the same flow in virtual time."""
    _wait_for_jobs(http, ("rayjob-tpu-v6e-dws-1", "rayjob-tpu-v6e-dws-2"), time.monotonic() + 420)
    _run("flexq get rayjobs,workloads", env, guide)
    _run("flexq logs job/rayjob-tpu-v6e-dws-1 | tail -n 6", env, guide)
    _summary(http)
    time.sleep(17)  # idle nodes go after scaleDownAfter (15 s in capacity-demo.yaml)
    _run("flexq get nodepools,nodes", env, guide)
    if shutil.which("kubectl"):
        _run("flexq kubeconfig --write $KUBECONFIG", env, guide)
        _run("kubectl get clusterqueues,localqueues,rayjobs", env, guide)
    if shutil.which("gcloud"):
        _run('eval "$(flexq env)"; gcloud container node-pools list --cluster=tpu-cluster '
             '--location=us-east5-b', env, guide)
    _run("flexq simulate scenario-capacity.yaml", env, guide)
    _run("flexq simulate scenario.yaml", env, guide)
    print("\nDone: both RayJobs were queued, placed on Plan A and Plan B, given nodes, trained on Ray and "
          "succeeded; the pools went back to 0. The same flow was replayed in virtual time with the guide's "
          "real timings (DWS after 30 minutes).")


if __name__ == "__main__":
    main()
