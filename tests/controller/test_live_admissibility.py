"""The live side of tests/scheduler/test_admissibility.py: a Namespace's labels (the API server sets
``kubernetes.io/metadata.name``) against the ClusterQueue's namespaceSelector, and a LocalQueue's or a ClusterQueue's
stopPolicy, changed with flexq apply and read by the queue controller."""

from __future__ import annotations

from typing import Any

import yaml

from tests import admin
from tests.conftest import Server
from tests.queues import queue_yaml
from tests.support import condition, eventually, job


def _workload(server: Server, namespace: str, job_name: str) -> dict[str, Any]:
    items = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads").json()["items"]
    return next(w for w in items if w["metadata"]["ownerReferences"][0]["name"] == job_name)


def _quota_reserved(server: Server, namespace: str, job_name: str) -> tuple[str | None, str, str]:
    wl = _workload(server, namespace, job_name)
    cond = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
    return condition(wl, "QuotaReserved"), cond["reason"], cond["message"]


def _in(namespace: str, name: str) -> dict[str, Any]:
    made = job(name, queue="q", cpu="1").object()
    made["metadata"]["namespace"] = namespace  # type: ignore[index]
    return made


def test_a_namespace_the_selector_leaves_out_waits_until_it_is_labelled(flexq: Any, server: Server) -> None:
    selector = 'namespaceSelector: {matchLabels: {team: a}}'
    queues = queue_yaml(("default-flavor", None)).replace("namespaceSelector: {}", selector)
    namespaces = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b, labels: {team: b}}\n"
    other_lq = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: team-b}\n" \
               "spec: {clusterQueue: cq}\n"
    assert flexq("apply", "-f", "-", input="---\n".join([namespaces, queues, other_lq])).code == 0
    ns = admin.get(f"{server.url}/api/v1/namespaces/team-b").json()
    assert ns["metadata"]["labels"] == {"team": "b", "kubernetes.io/metadata.name": "team-b"}
    assert flexq("apply", "-f", "-", input=yaml.safe_dump(_in("team-b", "left-out"))).code == 0

    assert eventually(lambda: _quota_reserved(server, "team-b", "left-out")) == (
        "False", "Misconfigured", "workload namespace doesn't match ClusterQueue selector")
    relabelled = namespaces.replace("team: b", "team: a")
    assert flexq("apply", "-f", "-", input=relabelled).code == 0

    def reserved() -> str | None:
        status = _quota_reserved(server, "team-b", "left-out")[0]
        assert status == "True"
        return status

    assert eventually(reserved) == "True"


def test_a_held_local_queue_admits_nothing_until_it_is_resumed(flexq: Any, server: Server) -> None:
    held = queue_yaml(("default-flavor", None)).replace("spec: {clusterQueue: cq}", "spec: {clusterQueue: cq, "
                                                        "stopPolicy: Hold}")
    assert flexq("apply", "-f", "-", input=held).code == 0
    assert flexq("apply", "-f", "-", input=yaml.safe_dump(_in("default", "held"))).code == 0
    assert eventually(lambda: _quota_reserved(server, "default", "held")) == (
        "False", "Suspended", "LocalQueue q is stopped")
    assert flexq("apply", "-f", "-", input=queue_yaml(("default-flavor", None))).code == 0

    def reserved() -> str | None:
        status = _quota_reserved(server, "default", "held")[0]
        assert status == "True"
        return status

    assert eventually(reserved) == "True"


def _evicted(server: Server, namespace: str, job_name: str) -> tuple[str, str]:
    wl = _workload(server, namespace, job_name)
    cond = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    assert cond["status"] == "True"
    return cond["reason"], cond["message"]


def test_a_cluster_queue_held_and_drained_evicts_what_it_admitted_until_it_is_resumed(flexq: Any,
                                                                                       server: Server) -> None:
    queues = queue_yaml(("default-flavor", None))
    assert flexq("apply", "-f", "-", input=queues).code == 0
    assert flexq("apply", "-f", "-", input=yaml.safe_dump(_in("default", "drained"))).code == 0

    def reserved() -> str | None:
        status = _quota_reserved(server, "default", "drained")[0]
        assert status == "True"
        return status

    assert eventually(reserved) == "True"
    stopped = queues.replace("  namespaceSelector: {}\n", "  namespaceSelector: {}\n  stopPolicy: HoldAndDrain\n")
    assert flexq("apply", "-f", "-", input=stopped).code == 0
    assert eventually(lambda: _evicted(server, "default", "drained")) == (
        "ClusterQueueStopped", "The ClusterQueue is stopped")
    assert eventually(lambda: _quota_reserved(server, "default", "drained")) == (
        "False", "Suspended", "ClusterQueue cq is inactive")
    assert flexq("apply", "-f", "-", input=queues).code == 0
    assert eventually(reserved) == "True"
