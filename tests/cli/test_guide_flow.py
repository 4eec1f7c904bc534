"""The guide's flow through the flexq CLI against a real server process."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import GUIDE, GUIDE_ENV, Result, guide_text


def _quota(obj: dict[str, Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    return [(f["name"], [(r["name"], r["nominalQuota"]) for r in f["resources"]])
            for f in obj["spec"]["resourceGroups"][0]["flavors"]]


def test_guide_flow(flexq: Any, server: Any, tmp_path: Path) -> None:
    queue = guide_text("dws-tpu-queue.yaml")
    applied: Result = flexq("apply", "-f", "-", input=queue)
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
    shown = flexq("get", "clusterqueue", "cluster-queue", "-o", "yaml")
    assert shown.code == 0, shown.err
    cq = yaml.safe_load(shown.out)
    source = yaml.safe_load(queue.split("---")[3])
    assert _quota(cq) == _quota(source)
    assert [f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]] == ["default-cpu", "on-demand", "dws"]

    made = flexq("create", "configmap", "jax-train-script", f"--from-file={GUIDE / 'train.py'}")
    assert made.code == 0 and made.out.strip() == "configmap/jax-train-script created", made.err
    for job_id in ("1", "2"):
        job = flexq("apply", "-f", "-", input=guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID=job_id))
        assert job.out.strip() == f"rayjob.ray.io/rayjob-tpu-v6e-dws-{job_id} created", job.err
    listed = flexq("get", "rayjobs")
    lines = listed.out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "JOB", "STATUS"]
    assert [line.split()[0] for line in lines[1:]] == ["rayjob-tpu-v6e-dws-1", "rayjob-tpu-v6e-dws-2"]
    cm = yaml.safe_load(flexq("get", "cm", "jax-train-script", "-o", "yaml").out)
    assert cm["data"]["train.py"] == (GUIDE / "train.py").read_text()

    many = flexq("get", "clusterqueues,localqueues,workloads,rayjobs")
    assert many.code == 0
    assert "clusterqueue.kueue.x-k8s.io/cluster-queue" in many.out
    assert "rayjob.ray.io/rayjob-tpu-v6e-dws-2" in many.out

    again = flexq("apply", "-f", "-", input=queue)
    assert all(line.endswith(" unchanged") for line in again.out.splitlines()), again.out

    described = flexq("describe", "cq", "cluster-queue")
    assert "Can admit new workloads" in described.out and "Events:" in described.out

    deleted = flexq("delete", "-f", "-", input=queue)
    assert deleted.code == 0 and 'clusterqueue.kueue.x-k8s.io "cluster-queue" deleted' in deleted.out
    assert flexq("get", "cq").err.strip() == "No resources found"


@pytest.mark.skipif(shutil.which("envsubst") is None, reason="envsubst is not installed")
def test_envsubst_pipe_exactly_as_the_guide(server: Any, tmp_path: Path) -> None:
    flexq_bin = Path(__import__("sys").executable).parent / "flexq"
    command = f"envsubst < {GUIDE / 'dws-tpu-queue.yaml'} | {flexq_bin} apply -f -"
    proc = subprocess.run(command, shell=True, capture_output=True, text=True, env=server.env(**GUIDE_ENV),
                          check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 7


def test_env_flags_substitute(flexq: Any) -> None:
    result = flexq("apply", "-f", str(GUIDE / "dws-tpu-queue.yaml"), "--env", "ONDEMAND_NODEPOOL=od",
                   "--env", "DWS_NODEPOOL=dws-pool")
    assert result.code == 0, result.err
    flavor = yaml.safe_load(flexq("get", "rf", "on-demand", "-o", "yaml").out)
    assert flavor["spec"]["nodeLabels"] == {"cloud.google.com/gke-nodepool": "od"}


def test_env_file_substitutes(flexq: Any, tmp_path: Path) -> None:
    env_file = tmp_path / "env.sh"
    env_file.write_text((GUIDE / "env.sh").read_text())
    result = flexq("apply", "-f", str(GUIDE / "dws-tpu-queue.yaml"), "--env-file", str(env_file))
    assert result.code == 0, result.err
    assert "PROJECT_ID skipped" in result.err
    flavor = yaml.safe_load(flexq("get", "rf", "dws", "-o", "yaml").out)
    assert flavor["spec"]["nodeLabels"] == {"cloud.google.com/gke-nodepool": "dws-pool"}


def test_dangling_reference_shown_by_get_and_describe(flexq: Any) -> None:
    lq = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n  name: q\n  namespace: default\n"
          "spec:\n  clusterQueue: missing\n")
    assert flexq("apply", "-f", "-", input=lq).code == 0
    table = flexq("get", "lq", "q").out.splitlines()
    assert table[0].split() == ["NAME", "CLUSTERQUEUE", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS", "ACTIVE",
                                "REASON"]
    assert table[1].split() == ["q", "missing", "0", "0", "False", "ClusterQueueDoesNotExist"]
    assert "Can't submit new workloads to clusterQueue" in flexq("describe", "lq", "q").out


def test_output_formats_and_names(flexq: Any) -> None:
    flexq("apply", "-f", "-", input=guide_text("dws-tpu-queue.yaml"))
    assert flexq("get", "rf", "-o", "name").out.split() == [
        "resourceflavor.kueue.x-k8s.io/default-cpu", "resourceflavor.kueue.x-k8s.io/dws",
        "resourceflavor.kueue.x-k8s.io/on-demand"]
    as_list = yaml.safe_load(flexq("get", "flavors", "-o", "json").out)
    assert as_list["kind"] == "List" and len(as_list["items"]) == 3
    wide = flexq("get", "cq", "-o", "wide").out.splitlines()[0]
    assert "STRATEGY" in wide and "ADMITTED WORKLOADS" in wide
    assert "STRATEGY" not in flexq("get", "cq").out.splitlines()[0]
    bad = flexq("get", "cq", "-o", "toml")
    assert bad.code != 0 and "allowed formats" in bad.err
    unknown = flexq("get", "widgets")
    assert unknown.code == 1 and 'doesn\'t have a resource type "widgets"' in unknown.err
    missing = flexq("get", "cq", "nope")
    assert missing.code == 1 and "(NotFound)" in missing.err and "Traceback" not in missing.err
