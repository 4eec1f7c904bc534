"""A job that loses its flex-start nodes mid-run is requeued, admitted again, and resumes from its checkpoint."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests import admin
from tests.conftest import GUIDE, Server, guide_text
from tests.runtime.test_guide_end_to_end import dws_pools, ray_server
from tests.support import assert_done, cli_ok, eventually, get_rayjob

__all__ = ["ray_server"]

EXAMPLE = GUIDE.parent / "checkpoint" / "train_checkpoint.py"
POOLS = dws_pools(8)


def _events(srv: Server) -> list[dict[str, Any]]:
    return list(admin.get(srv.url + "/api/v1/namespaces/default/events").json()["items"])


@pytest.mark.long
def test_a_requeued_job_resumes_from_its_latest_checkpoint(ray_server: Server) -> None:
    srv = ray_server
    cli_ok(srv, "apply", "-f", "-", input=POOLS)
    # No Plan A quota: the job runs on dws (flex-start) nodes.
    queue = guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 16", "nominalQuota: 0")
    cli_ok(srv, "apply", "-f", "-", input=queue)
    cli_ok(srv, "create", "configmap", "jax-train-script", f"--from-file={EXAMPLE}")
    cli_ok(srv, "apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="ck").replace(
        "/app/train.py", "/app/train_checkpoint.py"))
    name = "rayjob-tpu-v6e-dws-ck"

    def checkpointed() -> None:
        metrics = get_rayjob(srv, name).get("status", {}).get("trainingMetrics") or {}
        assert metrics.get("epoch", 0) >= 5, "a checkpoint beyond the first epoch"

    eventually(checkpointed, timeout=300)  # a Ray cluster's start and JAX's first steps, on a busy machine
    # The cloud takes a flex-start node away mid-run (as when it reclaims a VM).
    nodes = [n["metadata"]["name"] for n in admin.get(srv.url + "/api/v1/nodes").json()["items"]
             if n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == "dws-pool"]
    assert nodes
    assert admin.delete(f"{srv.url}/api/v1/nodes/{nodes[0]}").status_code == 200

    def evicted() -> None:
        assert any(e["reason"] == "Evicted" and f"Node {nodes[0]} was deleted" in e["message"] for e in _events(srv))

    eventually(evicted, timeout=30)
    eventually(lambda: assert_done(get_rayjob(srv, name)), timeout=180)
    status = get_rayjob(srv, name)["status"]
    log = cli_ok(srv, "logs", f"rayjob/{name}").stdout
    assert status["jobStatus"] == "SUCCEEDED", log[-3000:]
    first, _, second = log.partition("flexq: the job runs again")
    assert second, "the log holds both runs"
    assert "Resuming from checkpoint" not in first and "' was stopped" in first
    resumed = re.findall(r"Resuming from checkpoint at epoch (\d+)", second)
    assert resumed and int(resumed[0]) > 5, second[:3000]
    assert "Epoch 0:" not in second, "the second run did not start over"
    assert "Training Complete!" in second and status["trainingMetrics"]["epoch"] == 55
    assert any(e["reason"] == "ProvisioningRequest" and "-dws-prov-2" in e["message"] for e in _events(srv)), \
        "the requeued workload asked DWS for nodes again"
