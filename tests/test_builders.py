"""The Job builder tests share makes Jobs that flexq accepts as ``flexq apply`` does (strictly), and says each field
where Kubernetes has it."""

from __future__ import annotations

from flexq.api import load_documents, normalize
from tests.support import job

QUEUED = {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}


def test_a_job_said_in_full_is_accepted_strictly_and_keeps_every_field() -> None:
    made = (job("train", queue="team", cpu="500m", pods=3).namespace("ml").uid("u-1").priority_class("urgent")
            .pod_priority_class("high").annotate("flexq.dev/expected-run-time", "1h").completions(3).suspended()
            .memory("1Gi").image("app").container_name("main").command("sleep", "60").tolerate(QUEUED)
            .restart_policy("OnFailure"))
    for doc in load_documents(made.yaml(), "built.yaml"):
        info, stored = normalize(doc, strict=True)
        assert info.kind == "Job"
        assert stored["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team",
                                                "kueue.x-k8s.io/priority-class": "urgent"}
    obj = made.object()
    assert obj["metadata"] == {"name": "train", "namespace": "ml", "uid": "u-1",
                               "labels": {"kueue.x-k8s.io/queue-name": "team",
                                          "kueue.x-k8s.io/priority-class": "urgent"},
                               "annotations": {"flexq.dev/expected-run-time": "1h"}}
    assert obj["spec"]["parallelism"] == 3 and obj["spec"]["completions"] == 3 and obj["spec"]["suspend"] is True
    pod = obj["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure" and pod["priorityClassName"] == "high" and pod["tolerations"] == [QUEUED]
    assert pod["containers"] == [{"name": "main", "image": "app", "command": ["sleep", "60"],
                                  "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]


def test_a_plain_job_says_only_the_defaults() -> None:
    assert job("a").object() == {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a", "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    assert "namespace" not in job("a").namespace(None).object()["metadata"]
    assert "restartPolicy" not in job("a").restart_policy(None).object()["spec"]["template"]["spec"]
    assert "labels" not in job("a").priority_class(None).object()["metadata"], "no priority class: no label"


def test_each_object_is_a_fresh_copy() -> None:
    built = job("a", cpu=1).tolerate(QUEUED)
    first = built.object()
    first["spec"]["template"]["spec"]["tolerations"][0]["key"] = "changed"
    first["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "9"
    assert built.object()["spec"]["template"]["spec"]["tolerations"] == [QUEUED]
    assert built.object()["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
