"""The guide's gcloud commands with the real gcloud, pointed at flexq by `flexq env`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Server

pytestmark = pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")


def _env(server: Server, tmp_path: Path) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-m", "flexq.cli.main", "env"], capture_output=True, text=True,
                         env=server.env(), check=True).stdout
    env = dict(server.env(), HOME=str(tmp_path))
    for line in out.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    return env


def test_cluster_sh_with_real_gcloud(server: Server, tmp_path: Path, flexq: Any) -> None:
    env = _env(server, tmp_path)
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
    pool = yaml.safe_load(flexq("get", "nodepool", "dws-pool", "-o", "yaml").out)
    assert pool["spec"]["queuedProvisioning"] is True and pool["spec"]["tpuTopology"] == "4x4"
    refused = gcloud("container", "node-pools", "create", "bad", "--cluster=tpu-cluster", "--location=us-east5-b",
                     "--machine-type=ct6e-standard-4t", "--tpu-topology=4x4", "--enable-autoscaling",
                     "--num-nodes=0", "--max-nodes=3")
    assert refused.returncode != 0 and "not a multiple of the 4 hosts" in refused.stderr
    missing = gcloud("container", "node-pools", "describe", "nope", "--cluster=tpu-cluster", "--location=us-east5-b")
    assert missing.returncode != 0 and "404" in missing.stderr
    deleted = gcloud("container", "clusters", "delete", "tpu-cluster", *flags, "--quiet")
    assert deleted.returncode == 0, deleted.stderr
    assert flexq("get", "nodepools").err.strip() == "No resources found"
    # The user's own configuration was not touched: gcloud and kubectl used flexq's files.
    assert not (tmp_path / ".config" / "gcloud").exists()
    assert not (tmp_path / ".kube").exists()
