"""A Node's taints changed in the store (``kubectl taint``) after the controller read its changes, and before it
wrote its nodes, are not written over: the controller reads them at its next step and keeps them. The Node objects
of the last pool go when it does."""

from __future__ import annotations

from pathlib import Path

from flexq.store import Key
from tests.support import controller_on_store, eventually

POOL = """apiVersion: flexq.dev/v1alpha1
kind: Cluster
metadata: {name: c}
---
apiVersion: flexq.dev/v1alpha1
kind: NodePool
metadata: {name: np}
spec: {cluster: c, machineType: n2-standard-16, initialNodeCount: 1}
"""

MAINTENANCE = {"key": "maintenance", "value": "soon", "effect": "NoSchedule"}


def test_a_taint_given_between_a_steps_read_and_its_write_is_kept(tmp_path: Path) -> None:
    store, _, controller = controller_on_store(tmp_path, objects=POOL)
    try:
        controller.sync()
        (node,) = store.list_objects("", "nodes")[0]
        name = node["metadata"]["name"]
        assert node["spec"]["taints"] == []
        store.update(Key("", "nodes", "", name), {**node, "spec": {"taints": [MAINTENANCE]}})
        controller.capacity.write()  # a step's write, before it has read the change
        assert store.get(Key("", "nodes", "", name))["spec"]["taints"] == [MAINTENANCE]
        controller.sync()
        assert store.get(Key("", "nodes", "", name))["spec"]["taints"] == [MAINTENANCE]
        driver = controller.capacity.driver
        assert driver is not None and [t.key for t in driver.cluster.nodes[name].taints] == ["maintenance"]
        # Read, the taint is the node's: taken off in the store, it goes from the node too.
        store.update(Key("", "nodes", "", name), {**store.get(Key("", "nodes", "", name)), "spec": {"taints": []}})
        controller.sync()
        assert driver.cluster.nodes[name].taints == ()
        assert store.get(Key("", "nodes", "", name))["spec"]["taints"] == []
    finally:
        controller.stop()
        store.close()


def test_the_last_pool_deleted_takes_its_node_objects_with_it(tmp_path: Path) -> None:
    store, _, controller = controller_on_store(tmp_path, objects=POOL)
    try:
        controller.sync()
        assert len(store.list_objects("", "nodes")[0]) == 1
        store.delete(Key("flexq.dev", "nodepools", "", "np"))

        def gone() -> None:  # configuration changes are read at most every RECONFIGURE_EVERY
            controller.sync()
            assert controller.capacity.driver is None

        eventually(gone)
        controller.sync()
        assert store.list_objects("", "nodes")[0] == []
    finally:
        controller.stop()
        store.close()
