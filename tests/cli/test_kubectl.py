"""The guide's kubectl commands, unchanged, with the real kubectl against a flexq server."""

from __future__ import annotations

from typing import Any

import yaml

from tests.conftest import GUIDE, guide_text


def test_guide_with_real_kubectl(kubectl: Any, flexq: Any) -> None:
    queue = guide_text("dws-tpu-queue.yaml")
    applied = kubectl("apply", "-f", "-", input=queue)
    assert applied.code == 0, applied.err
    assert applied.out.splitlines() == [
        "resourceflavor.kueue.x-k8s.io/default-cpu created",
        "resourceflavor.kueue.x-k8s.io/on-demand created",
        "resourceflavor.kueue.x-k8s.io/dws created",
        "clusterqueue.kueue.x-k8s.io/cluster-queue created",
        "localqueue.kueue.x-k8s.io/user-queue created",
        "admissioncheck.kueue.x-k8s.io/dws-prov created",
        "provisioningrequestconfig.kueue.x-k8s.io/dws-config created",
    ]
    # Re-applying is a client-side apply patch: unchanged objects stay unchanged, a change is configured.
    again = kubectl("apply", "-f", "-", input=queue)
    assert again.code == 0 and all(line.endswith(" unchanged") for line in again.out.splitlines()), again.out
    changed = kubectl("apply", "-f", "-", input=queue.replace("nominalQuota: 16", "nominalQuota: 8"))
    assert "clusterqueue.kueue.x-k8s.io/cluster-queue configured" in changed.out, changed.err
    cq = yaml.safe_load(kubectl("get", "cq", "cluster-queue", "-o", "yaml").out)
    assert cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2] == {"name": "google.com/tpu",
                                                                             "nominalQuota": 8}
    # flexq's CLI sees the same objects.
    assert yaml.safe_load(flexq("get", "cq", "cluster-queue", "-o", "yaml").out)["metadata"]["uid"] == \
        cq["metadata"]["uid"]

    made = kubectl("create", "configmap", "jax-train-script", f"--from-file={GUIDE / 'train.py'}")
    assert made.code == 0 and made.out.strip() == "configmap/jax-train-script created", made.err
    cm = yaml.safe_load(kubectl("get", "configmap", "jax-train-script", "-o", "yaml").out)
    assert cm["data"]["train.py"] == (GUIDE / "train.py").read_text()
    for job_id in ("1", "2"):
        job = kubectl("apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID=job_id))
        assert job.out.strip() == f"rayjob.ray.io/rayjob-tpu-v6e-dws-{job_id} created", job.err

    listed = kubectl("get", "clusterqueues,localqueues,workloads,rayjobs")
    assert listed.code == 0, listed.err
    assert "clusterqueue.kueue.x-k8s.io/cluster-queue" in listed.out
    assert "localqueue.kueue.x-k8s.io/user-queue" in listed.out
    assert "rayjob.ray.io/rayjob-tpu-v6e-dws-1" in listed.out and "rayjob.ray.io/rayjob-tpu-v6e-dws-2" in listed.out
    header = kubectl("get", "cq").out.splitlines()[0]
    assert header.split()[:4] == ["NAME", "COHORT", "PENDING", "WORKLOADS"]

    described = kubectl("describe", "clusterqueue", "cluster-queue")
    assert described.code == 0, described.err
    assert "Can admit new workloads" in described.out
    described_job = kubectl("describe", "rayjob", "rayjob-tpu-v6e-dws-1")
    assert "python /app/train.py" in described_job.out

    deleted = kubectl("delete", "-f", "-", input=queue)
    assert deleted.code == 0, deleted.err
    assert 'clusterqueue.kueue.x-k8s.io "cluster-queue" deleted' in deleted.out
    gone = kubectl("get", "cq")
    assert "No resources found" in gone.err
    job_gone = kubectl("delete", "rayjob", "rayjob-tpu-v6e-dws-1")
    assert job_gone.code == 0, job_gone.err


def test_kubectl_reports_invalid_objects(kubectl: Any) -> None:
    bad = guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 75Gi", "nominalQuota: lots")
    result = kubectl("apply", "-f", "-", input=bad)
    assert result.code != 0
    assert 'invalid quantity \\"lots\\"' in result.err or 'invalid quantity "lots"' in result.err, result.err
    assert "spec.resourceGroups[0].flavors[1].resources[1].nominalQuota" in result.err


def test_kubectl_discovery_short_names_and_dangling_reference(kubectl: Any) -> None:
    lq = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n  name: q\n  namespace: default\n"
          "spec:\n  clusterQueue: missing\n")
    assert kubectl("apply", "-f", "-", input=lq).code == 0
    row = kubectl("get", "lq").out.splitlines()[1].split()
    assert row[0] == "q" and "ClusterQueueDoesNotExist" in row
    resources = kubectl("api-resources", "--api-group=kueue.x-k8s.io").out
    for short in ("cq", "lq", "rf", "wl"):
        assert f" {short}" in resources or f",{short}" in resources, resources
    assert kubectl("get", "wl").code == 0
