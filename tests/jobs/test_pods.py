"""Kueue's Pod integration, the pure part: the webhook's gate and refusals, roles, pod sets, outcomes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flexq.api.object_errors import InvalidObject
from flexq.jobs.pods import GATE, group_podsets, outcome, pod_webhook, role, template


def _pod(name: str, cpu: str = "1", labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         command: list[str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": command or ["true"],
                                     "resources": {"requests": {"cpu": cpu}}}]}}


QUEUED = {"kueue.x-k8s.io/queue-name": "q"}
GROUPED = {**QUEUED, "kueue.x-k8s.io/pod-group-name": "g"}


def test_a_queued_pod_is_gated_and_marked_managed() -> None:
    pod = _pod("a", labels=QUEUED)
    pod["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
    pod_webhook(pod, None)
    assert pod["spec"]["schedulingGates"] == [{"name": "example.com/other"}, {"name": GATE}]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert pod["status"]["conditions"][0]["reason"] == "SchedulingGated"


def test_a_pod_without_a_queue_is_left_alone() -> None:
    pod = _pod("a")
    before = copy.deepcopy(pod)
    pod_webhook(pod, None)
    assert pod == before


def test_an_update_keeps_what_the_queue_set() -> None:
    old = _pod("a", labels=QUEUED)
    pod_webhook(old, None)
    old["spec"]["nodeSelector"] = {"pool": "x"}
    new = _pod("a", labels=QUEUED)  # re-applied as written: no gate, no selector
    pod_webhook(new, old)
    assert new["spec"]["schedulingGates"] == [{"name": GATE}] and new["spec"]["nodeSelector"] == {"pool": "x"}


@pytest.mark.parametrize(("annotations", "message"), [
    ({}, "Required value"),
    ({"kueue.x-k8s.io/pod-group-total-count": "two"}, "Invalid value: 'two'"),
    ({"kueue.x-k8s.io/pod-group-total-count": "0"}, "Invalid value: '0'"),
])
def test_a_group_pod_needs_a_total_count(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        pod_webhook(_pod("a", labels=GROUPED, annotations=annotations), None)
    error = caught.value.errors[0]
    assert error.path == "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]"
    assert message in error.message


def test_a_groups_pod_sets_are_its_roles() -> None:
    total = {"kueue.x-k8s.io/pod-group-total-count": "4"}
    leaders = [_pod("l", cpu="2", labels=GROUPED, annotations=total)]
    workers = [_pod(f"w{i}", labels=GROUPED, annotations=total, command=["sh", "-c", "work"]) for i in range(3)]
    for pod in leaders + workers:
        pod_webhook(pod, None)
    sets, templates = group_podsets([workers[0], *leaders, *workers[1:]])
    assert [(s.name, s.count, s.requests) for s in sets] == [(role(workers[0]), 3, {"cpu": 1000}),
                                                             (role(leaders[0]), 1, {"cpu": 2000})]
    assert role(workers[0]) != role(leaders[0]) and len(role(workers[0])) == 8
    assert "schedulingGates" not in templates[role(workers[0])]["spec"], "the template is the pod without the gate"
    workers[0]["spec"]["nodeSelector"] = {"pool": "a"}  # as admission adds it
    assert role(workers[0]) == role(workers[1]), "the role recorded at creation stays"


@pytest.mark.parametrize(("phases", "verdict"), [
    ([], None),
    (["Succeeded", "Running"], None),
    (["Succeeded", "Succeeded"], "Succeeded"),
    (["Succeeded", "Failed"], "Failed"),
])
def test_a_workload_ends_when_all_its_pods_have(phases: list[str], verdict: str | None) -> None:
    assert outcome(phases) == verdict


def test_the_template_drops_the_node_name() -> None:
    pod = _pod("a", labels=QUEUED)
    pod["spec"]["nodeName"] = "n1"
    assert "nodeName" not in template(pod)["spec"] and pod["spec"]["nodeName"] == "n1"
