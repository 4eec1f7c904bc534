"""The node census (the simulator's node samples, ``/metrics``' ``flexq_node_pool_nodes``, the dashboard and
``flexq top``): a node NotReady after it was ready counts as not ready, not as booting, on the capacity model and on
the Node objects alike."""

from __future__ import annotations

from typing import Any

from flexq.capacity import EmulatedCloud, NodePoolSpec, machine_type
from flexq.capacity.cluster import Cluster, PoolNodes
from flexq.objects import NODE_BOOTING, node_state
from flexq.server.ui_data import pools


def test_a_notready_node_is_counted_not_ready() -> None:
    pool = NodePoolSpec("cpu", machine_type("n2-standard-16"), initial_nodes=3, autoscaling=True, max_nodes=8)
    cluster = Cluster([pool], EmulatedCloud())
    first, second, third = sorted(cluster.start_with_initial_nodes(0.0), key=lambda n: n.name)
    first.down_since = 10.0
    second.pods["default/a"] = {"cpu": 1000}
    third.down_since = 10.0
    third.pods["default/b"] = {"cpu": 1000}  # its pods not evicted yet: NotReady all the same
    booting, _ = cluster.scale_up("cpu", 1, 20.0)
    assert len(booting) == 1 and booting[0].ready_at > 20.0
    assert cluster.census(20.0) == {"cpu": PoolNodes(booting=1, idle=0, busy=1, not_ready=2)}
    assert cluster.census(20.0)["cpu"].total == 4


def _node(name: str, ready: dict[str, str] | None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"cloud.google.com/gke-nodepool": "cpu"}},
            "status": {"conditions": [{"type": "Ready", **ready}] if ready else []}}


NODES = {
    "up": (_node("up", {"status": "True", "reason": "KubeletReady"}), "ready"),
    "booting": (_node("booting", {"status": "False", "reason": NODE_BOOTING}), "booting"),
    "no condition yet": (_node("new", None), "booting"),
    "patched NotReady": (_node("down", {"status": "False", "reason": "KubeletNotReady"}), "not_ready"),
    "unknown": (_node("gone", {"status": "Unknown", "reason": "NodeStatusUnknown"}), "not_ready"),
}


def test_a_node_objects_state_from_its_ready_condition() -> None:
    assert {case: node_state(node) for case, (node, _) in NODES.items()} == {
        case: state for case, (_, state) in NODES.items()}


def test_the_dashboard_counts_notready_nodes_apart() -> None:
    node_pool = {"metadata": {"name": "cpu"}, "spec": {"machineType": "n2-standard-16"}}
    (shown,) = pools([node_pool], [node for node, _ in NODES.values()], None)
    assert (shown.ready, shown.booting, shown.notReady) == (1, 2, 2)
    assert shown.costPerHour == round(5 * (shown.pricePerNodeHour or 0.0), 4), "a NotReady node is still paid for"
