"""The guide's gcloud commands with the real gcloud, pointed at flexq by `flexq env`."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import forks
from tests.conftest import Server, free_port, free_port_pair, start_server, stop_server
from tests.support.sockets import listening

pytestmark = pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")


@pytest.fixture
def tls_server(tmp_path: Path) -> Any:
    srv = start_server(tmp_path / "home", "--tls-port", str(free_port()))
    try:
        yield srv
    finally:
        stop_server(srv)


def test_cluster_sh_with_real_gcloud(tls_server: Server, tmp_path: Path) -> None:
    server = tls_server
    env = server.tools_env(tmp_path)

    def flexq(*args: str) -> Any:
        return forks.run(args, text=True, env=server.env(), timeout=60)
    assert env["CLOUDSDK_CONFIG"].startswith(str(server.home))

    def gcloud(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["gcloud", *args], capture_output=True, text=True, env=env, timeout=120, check=False)

    flags = ["--location=us-east5-b", "--project=demo"]
    made = gcloud("container", "clusters", "create", "tpu-cluster", "--cluster-version=1.34",
                  "--machine-type=n2-standard-16", "--enable-image-streaming", "--addons=RayOperator", *flags)
    assert made.returncode == 0, made.stderr
    assert "RUNNING" in made.stdout
    assert "gke_demo_us-east5-b_tpu-cluster" in Path(env["KUBECONFIG"]).read_text(), "get-credentials' entry"
    for pool, extra in (("on-demand-pool", []), ("dws-pool", ["--enable-queued-provisioning", "--flex-start"])):
        result = gcloud("container", "node-pools", "create", pool, "--cluster=tpu-cluster", "--location=us-east5-b",
                        "--machine-type=ct6e-standard-4t", "--tpu-topology=4x4", "--reservation-affinity=none",
                        "--enable-autoscaling", *extra, "--num-nodes=0", "--min-nodes=0", "--max-nodes=4")
        assert result.returncode == 0, result.stderr
    flex = gcloud("container", "node-pools", "describe", "dws-pool", "--cluster=tpu-cluster",
                  "--location=us-east5-b", "--format=get(config.flexStart)")
    assert flex.returncode == 0 and flex.stdout == "True\n", flex.stderr
    # One model, two front doors: flexq sees what gcloud made.
    pool = yaml.safe_load(flexq("get", "nodepool", "dws-pool", "-o", "yaml").stdout)
    assert pool["spec"]["queuedProvisioning"] is True and pool["spec"]["tpuTopology"] == "4x4"
    refused = gcloud("container", "node-pools", "create", "bad", "--cluster=tpu-cluster", "--location=us-east5-b",
                     "--machine-type=ct6e-standard-4t", "--tpu-topology=4x4", "--enable-autoscaling",
                     "--num-nodes=0", "--max-nodes=3")
    assert refused.returncode != 0 and "not a multiple of the 4 hosts" in refused.stderr
    missing = gcloud("container", "node-pools", "describe", "nope", "--cluster=tpu-cluster", "--location=us-east5-b")
    assert missing.returncode != 0 and "404" in missing.stderr
    # get-credentials points kubectl at the server's HTTPS endpoint, verified with the cluster's CA, with a token
    # from gke-gcloud-auth-plugin; the guide's kubectl commands then run against that context.
    creds = gcloud("container", "clusters", "get-credentials", "tpu-cluster", *flags)
    assert creds.returncode == 0, creds.stderr
    kubeconfig = yaml.safe_load(Path(env["KUBECONFIG"]).read_text())
    assert kubeconfig["current-context"] == "gke_demo_us-east5-b_tpu-cluster"
    cluster = next(c["cluster"] for c in kubeconfig["clusters"] if c["name"] == "gke_demo_us-east5-b_tpu-cluster")
    assert cluster["server"].startswith("https://127.0.0.1:") and cluster["certificate-authority-data"]
    if shutil.which("kubectl") and shutil.which("gke-gcloud-auth-plugin"):
        got = subprocess.run(["kubectl", "get", "nodepools", "-o", "name"], capture_output=True, text=True, env=env,
                             timeout=60, check=False)
        assert got.returncode == 0, got.stderr
        assert "nodepool.flexq.dev/dws-pool" in got.stdout
    # A create ends once the pool's nodes are there, and a delete once they are gone, as GKE's operations do: a
    # script lists them right after.
    fixed = gcloud("container", "node-pools", "create", "cpu-pool", "--cluster=tpu-cluster", "--location=us-east5-b",
                   "--machine-type=n2-standard-16", "--num-nodes=3")
    assert fixed.returncode == 0, fixed.stderr
    assert len(flexq("get", "nodes", "-l", "cloud.google.com/gke-nodepool=cpu-pool", "-o", "name").stdout.split()) == 3
    dropped = gcloud("container", "node-pools", "delete", "cpu-pool", "--cluster=tpu-cluster",
                     "--location=us-east5-b", "--quiet")
    assert dropped.returncode == 0, dropped.stderr
    assert flexq("get", "nodes", "-l", "cloud.google.com/gke-nodepool=cpu-pool", "-o", "name").stdout == ""
    # What ran in the cluster goes with it: queues, jobs, their workloads, configmaps, namespaces of its own.
    queue = (Path(__file__).parents[2] / "examples" / "guide" / "dws-tpu-queue.yaml").read_text()
    queue = queue.replace("${ONDEMAND_NODEPOOL}", "on-demand-pool").replace("${DWS_NODEPOOL}", "dws-pool")
    (tmp_path / "queue.yaml").write_text(queue)
    assert flexq("apply", "-f", str(tmp_path / "queue.yaml")).returncode == 0
    assert flexq("create", "configmap", "jax-train-script", "--from-file",
                 str(Path(__file__).parents[2] / "examples" / "guide" / "train.py")).returncode == 0
    assert "clusterqueue.kueue.x-k8s.io/cluster-queue" in flexq("get", "clusterqueues", "-o", "name").stdout
    deleted = gcloud("container", "clusters", "delete", "tpu-cluster", *flags, "--quiet")
    assert deleted.returncode == 0, deleted.stderr
    assert flexq("get", "nodepools").stderr.strip() == "No resources found"
    for kind in ("clusterqueues", "localqueues", "resourceflavors", "admissionchecks", "configmaps"):
        listed = flexq("get", kind, "-A")
        assert listed.returncode == 0 and listed.stderr.strip() == "No resources found", (kind, listed.stdout)
    # The user's own configuration was not touched: gcloud and kubectl used flexq's files.
    assert not (tmp_path / ".config" / "gcloud").exists()
    assert not (tmp_path / ".kube" / "config").exists(), "kubectl used flexq's kubeconfig (~/.kube has its cache)"


def test_gcloud_sends_its_token_to_no_program_that_takes_the_ports(tmp_path: Path) -> None:
    """``flexq env`` points gcloud at the HTTPS endpoint with the server's CA: once the server has died, a program
    that takes either of its ports gets no token from gcloud (on the HTTPS port it cannot show the server's
    certificate)."""
    port = free_port_pair()
    srv = start_server(tmp_path / "home", port=port)
    env = srv.tools_env(tmp_path)
    config = (Path(env["CLOUDSDK_CONFIG"]) / "configurations" / "config_default").read_text()
    assert f"container = https://127.0.0.1:{port + 1}/" in config and "custom_ca_certs_file" in config
    token = srv.token

    def gcloud(timeout: float = 120) -> int:
        """gcloud's exit code (-1: still trying, as it does again and again, after ``timeout`` seconds)."""
        try:
            return subprocess.run(["gcloud", "container", "clusters", "list", "--location=us-east5-b"],
                                  capture_output=True, text=True, env=env, timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            return -1

    assert gcloud() == 0, "gcloud reaches the server over HTTPS, trusting its CA"
    srv.process.send_signal(signal.SIGKILL)
    srv.process.wait(timeout=30)
    stop_server(srv)
    with listening(port) as plain, listening(port + 1, answer_at_once=True) as secure:
        assert gcloud(timeout=6) != 0
    for taker in (plain, secure):
        assert token.encode() not in taker.received and b"Bearer" not in taker.received
    assert secure.connections, "gcloud went to the HTTPS port, and no further"
