"""The builders tests share: the Job builder makes Jobs that flexq accepts as ``flexq apply`` does (strictly), and
says each field where Kubernetes has it; the scheduler's builders keep every field said, in order, and nothing else."""

from __future__ import annotations

import pytest

from flexq.api import load_documents, normalize
from flexq.scheduler import ClusterQueueSpec, FlavorSpec, PodSet, PreemptionPolicy, Quota, ResourceGroup, Workload
from tests.support import cluster_queue, job, scheduler, workload

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


def test_a_workload_said_in_full_keeps_every_field_and_each_build_is_new() -> None:
    made = workload("w", cpu=1.5, pods=4, priority=7, on="team").namespace("ml").queue("lq-ml").created(3.0).uid("u")
    built = made.build()
    assert (built.namespace, built.name, built.queue, built.cluster_queue) == ("ml", "w", "lq-ml", "team")
    assert (built.priority, built.created, built.uid) == (7, 3.0, "u")
    assert built.podsets == (PodSet("main", 4, {"cpu": 1500}),)
    assert made.build() is not built and made.build() == built
    partial = workload("p").requests(cpu=1, memory=2).pods(6, at_least=2).replaces("old").build()
    assert partial.podsets == (PodSet("main", 6, {"cpu": 1000, "memory": 2000}, min_count=2),)
    assert partial.replaces == "old"
    pair = workload("r").podset("head", 1, cpu=1).podset("workers", 3, cpu=2).build()
    assert pair.podsets == (PodSet("head", 1, {"cpu": 1000}), PodSet("workers", 3, {"cpu": 2000}))


def test_a_plain_workload_and_queue_say_only_the_defaults() -> None:
    assert workload("w").build() == Workload("ns", "w", "lq", "cq", (PodSet("main", 1, {"cpu": 1000}),))
    assert cluster_queue().spec() == ClusterQueueSpec("cq")


def test_a_cluster_queue_keeps_its_flavors_in_order_with_every_quota() -> None:
    spec = (cluster_queue("team").flavor("od", cpu=4, memory=16).flavor("dws", borrowing=2, lending=1, cpu=8)
            .cohort("co").checks("prov").preempt(within=PreemptionPolicy.LOWER_PRIORITY, reclaim=PreemptionPolicy.ANY)
            .with_(fair_weight=2.0).spec())
    assert spec.groups == (ResourceGroup(("cpu", "memory"), ("od", "dws"), {
        ("od", "cpu"): Quota(4000), ("od", "memory"): Quota(16000),
        ("dws", "cpu"): Quota(8000, 2000, 1000), ("dws", "memory"): Quota(0)}),)
    assert (spec.name, spec.cohort, spec.checks, spec.fair_weight) == ("team", "co", (("prov", None),), 2.0)
    assert spec.within_cluster_queue is PreemptionPolicy.LOWER_PRIORITY
    assert spec.reclaim_within_cohort is PreemptionPolicy.ANY
    assert spec.borrow_within_cohort is PreemptionPolicy.NEVER
    with pytest.raises(TypeError):
        cluster_queue().with_(no_such_field=1).spec()


def test_a_scheduler_over_built_queues_admits_in_their_flavors_order() -> None:
    tainted = FlavorSpec("od", node_labels={"pool": "od"})
    sched = scheduler(cluster_queue().flavor("od", cpu=2).flavor("dws", cpu=4), flavors=[tainted])
    assert sched.cluster_queue_names() == ["cq"] and sched.config.flavors == {"od": tainted, "dws": FlavorSpec("dws")}
    for name in ("a", "b"):
        sched.add(workload(name, cpu=2).build(), 0.0)
    sched.schedule(1.0)
    assert {wl.name: wl.admission.flavors() if wl.admission else None for wl in sched.workloads()} == {
        "a": {"od"}, "b": {"dws"}}
