"""The guide's flow with real Ray, set up, run and checked: the pools (gcloud's commands through the CLI), the queue,
the configmap of the unmodified train.py, the two RayJobs; then what the finished run must show. One run of it costs
minutes of both cores, so it runs once: in test_cluster_sh, from the guide's own cluster.sh with the real gcloud and
kubectl, or, where those are missing, in ``test_guide_end_to_end`` from flexq's CLI; either way, where a browser
runs, the dashboard follows the jobs in it meanwhile (:mod:`tests.runtime.dashboard_follow`)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tests import admin
from tests.conftest import GUIDE, Server, guide_text
from tests.runtime.ray_leaks import RayProcesses
from tests.support import cli_ok, eventually, get_rayjob

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER = CHROMIUM is not None and importlib.util.find_spec("playwright") is not None
"""Whether the dashboard follows the run here (Debian's chromium and the playwright package)."""
CLIENTS = ("gcloud", "kubectl", "gke-gcloud-auth-plugin", "envsubst")
"""What cluster.sh runs; where all are installed, test_cluster_sh makes the guide's run."""
CLUSTER_SH = all(shutil.which(tool) for tool in CLIENTS)

JOBS = ("rayjob-tpu-v6e-dws-1", "rayjob-tpu-v6e-dws-2")


def capacity(folder: Path) -> Path:
    """The demo's emulated cloud (examples/guide/capacity-demo.yaml), with DWS answering after 15 s rather than 8: long
    enough for a browser on a busy machine to see job 2 wait for its ProvisioningRequest."""
    text = (GUIDE / "capacity-demo.yaml").read_text()
    assert "queuedDelay: 8s" in text, "the demo's DWS delay"
    path = folder / "capacity.yaml"
    path.write_text(text.replace("queuedDelay: 8s", "queuedDelay: 15s"))
    return path


def set_up(srv: Server) -> None:
    """The guide's cluster and pools (as its gcloud commands make them), its queue and its train.py configmap."""
    cli_ok(srv, "container", "clusters", "create", "tpu-cluster", "--machine-type=n2-standard-16", "--num-nodes=1")
    for pool, extra in (("on-demand-pool", []), ("dws-pool", ["--enable-queued-provisioning", "--flex-start"])):
        cli_ok(srv, "container", "node-pools", "create", pool, "--cluster=tpu-cluster",
               "--machine-type=ct6e-standard-4t", "--tpu-topology=4x4", "--enable-autoscaling", *extra,
               "--num-nodes=0", "--min-nodes=0", "--max-nodes=4")
    cli_ok(srv, "apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml"))
    cli_ok(srv, "create", "configmap", "jax-train-script", f"--from-file={GUIDE / 'train.py'}")


def submit(srv: Server, job_id: str) -> None:
    cli_ok(srv, "apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID=job_id))


def run(srv: Server, procs: RayProcesses, submit: Callable[[], None]) -> None:
    """The guide's run on a set-up server: ``submit`` sends the two jobs (in a thread of its own: it may follow them
    to their end, as cluster.sh does), the dashboard follows them in a browser where one runs, then
    :func:`check_the_run`."""
    with ThreadPoolExecutor(1, thread_name_prefix="guide-submit") as pool:
        submitted: list[Future[None]] = []

        def start() -> None:
            submitted.append(pool.submit(submit))

        if BROWSER and CHROMIUM is not None:
            from tests.runtime.dashboard_follow import follow
            follow(srv, CHROMIUM, start, procs)
        else:
            start()
        submitted[0].result()
    check_the_run(srv, procs)


def assert_no_ray(procs: RayProcesses) -> None:
    assert not (left := procs.running()), f"Ray processes still running: {left}"


def check_the_run(srv: Server, procs: RayProcesses) -> None:
    """Both jobs trained for real and succeeded, job 1 on Plan A (on-demand) and job 2 on DWS; the pools scaled back
    down, every Ray cluster is gone, and what kubectl sees is what KubeRay leaves."""
    def finished() -> None:
        for name in JOBS:
            assert get_rayjob(srv, name).get("status", {}).get("jobDeploymentStatus") in ("Complete", "Failed")

    eventually(finished, timeout=420)
    for name, pool in zip(JOBS, ("on-demand-pool", "dws-pool"), strict=True):
        _check_job(srv, name, pool)

    def scaled_down() -> None:
        pools = [n["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
                 for n in admin.get(srv.url + "/api/v1/nodes").json()["items"]]
        assert pools and set(pools) == {"default-pool"}, pools  # the TPU pools back to 0 (gcloud's default: 3 nodes)

    eventually(scaled_down, timeout=60)
    # shutdownAfterJobFinishes: each job's cluster goes once its end is written (its teardown may take a moment).
    eventually(lambda: assert_no_ray(procs), timeout=30)
    _check_races(srv)
    _check_what_kubectl_sees(srv)


def _check_job(srv: Server, name: str, pool: str) -> None:
    status = get_rayjob(srv, name)["status"]
    log = cli_ok(srv, "logs", f"job/{name}").stdout
    assert status["jobStatus"] == "SUCCEEDED", log[-3000:]
    assert "Training Complete!" in log
    assert "Traceback" not in log, log  # two clusters at once: each one's processes find their own
    assert log.rstrip().splitlines()[-2].startswith(f"Job '{name}-") and log.rstrip().splitlines()[-2].endswith(
        "' succeeded")
    assert status["trainingMetrics"]["epoch"] == 40 and status["trainingMetrics"]["loss"] < 1e-3
    workload = next(w for w in admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")
                    .json()["items"] if w["metadata"]["ownerReferences"][0]["name"] == name)
    assert workload["status"]["trainingMetrics"]["epoch"] == 40, "metrics reach the Workload (and describe)"
    assert workload["status"]["cost"]["usd"] > 0
    events = admin.get(f"{srv.url}/api/v1/namespaces/default/events").json()["items"]
    started = [e["message"] for e in events if e["reason"] == "Started" and name in e["involvedObject"]["name"]]
    assert started, "the workload's pods were bound to nodes"
    assert any(pool in str(e.get("message")) for e in events if e["reason"] in ("ScaledUp", "ProvisioningRequest")
               and name in e["involvedObject"]["name"]) or name == JOBS[0]


def _check_races(srv: Server) -> None:
    # The jobs are elastic (maxReplicas 2), but a slice on the head takes all train.py asks: none grew.
    events = admin.get(f"{srv.url}/api/v1/namespaces/default/events").json()["items"]
    assert [e["message"] for e in events if e["reason"] == "AutoscalerScaling"] == []
    assert len(admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads").json()["items"]) == 2
    # The guide's manifests race by default: job 1 also asked DWS, and that request was withdrawn unprovisioned
    # when Plan A started it; job 2 raced Plan A (busy with job 1) and DWS won.
    withdrawn = [e["message"] for e in events if e["reason"] == "ProvisioningRequest" and "withdrawn" in e["message"]]
    assert len(withdrawn) == 1 and "rayjob-rayjob-tpu-v6e-dws-1-" in withdrawn[0] and "no cost" in withdrawn[0]
    won = [e["message"] for e in events if e["reason"] == "RaceWon"]
    assert sorted(m.split()[1] for m in won) == ["dws", "on-demand"]


def _check_what_kubectl_sees(srv: Server) -> None:
    # As with KubeRay: the submitter Job and its pod stay, the cluster's pods are gone.
    jobs = admin.get(srv.url + "/apis/batch/v1/namespaces/default/jobs").json()["items"]
    assert sorted(j["metadata"]["name"] for j in jobs) == list(JOBS)
    assert all(j["status"]["succeeded"] == 1 for j in jobs)
    pods = admin.get(srv.url + "/api/v1/namespaces/default/pods").json()["items"]
    assert len(pods) == 2 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    if shutil.which("kubectl"):
        config = srv.home / "kc"
        cli_ok(srv, "kubeconfig", "--write", str(config))
        logged = subprocess.run(["kubectl", "logs", f"job/{JOBS[0]}"], capture_output=True, text=True,
                                env={**srv.env(), "KUBECONFIG": str(config)}, timeout=60, check=False)
        assert logged.returncode == 0, logged.stderr
        assert "Training Complete!" in logged.stdout and "' succeeded" in logged.stdout
