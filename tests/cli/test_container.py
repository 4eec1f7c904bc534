"""The guide's gcloud commands, through `flexq container` (flags exactly as cluster.sh writes them)."""

from __future__ import annotations

from typing import Any

import yaml

GUIDE_FLAGS = ["--location=us-east5-b", "--project=demo"]


def _setup(flexq: Any) -> None:
    made = flexq("container", "clusters", "create", "tpu-cluster", "--cluster-version=1.34",
                 "--machine-type=n2-standard-16", "--enable-image-streaming", "--addons=RayOperator", *GUIDE_FLAGS)
    assert made.code == 0, made.err
    for pool, extra in (("on-demand-pool", []), ("dws-pool", ["--enable-queued-provisioning", "--flex-start"])):
        result = flexq("container", "node-pools", "create", pool, "--cluster=tpu-cluster", "--location=us-east5-b",
                       "--machine-type=ct6e-standard-4t", "--tpu-topology=4x4", "--reservation-affinity=none",
                       "--enable-autoscaling", *extra, "--num-nodes=0", "--min-nodes=0", "--max-nodes=4")
        assert result.code == 0, result.err


def test_cluster_sh_commands(flexq: Any) -> None:
    _setup(flexq)
    flex = flexq("container", "node-pools", "describe", "dws-pool", "--cluster=tpu-cluster", "--location=us-east5-b",
                 "--format=get(config.flexStart)")
    assert flex.code == 0 and flex.out == "True\n", (flex.out, flex.err)
    on_demand = flexq("container", "node-pools", "describe", "on-demand-pool", "--cluster=tpu-cluster",
                      "--format=get(config.flexStart)")
    assert on_demand.out == "\n"
    described = yaml.safe_load(flexq("container", "node-pools", "describe", "dws-pool", "--cluster=tpu-cluster").out)
    assert described["queuedProvisioning"] == {"enabled": True}
    assert described["placementPolicy"] == {"tpuTopology": "4x4"}
    assert described["autoscaling"] == {"enabled": True, "minNodeCount": 0, "maxNodeCount": 4}
    assert {"key": "cloud.google.com/gke-queued", "value": "true", "effect": "NO_SCHEDULE"} in \
        described["config"]["taints"]
    assert described["config"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    listed = flexq("container", "node-pools", "list", "--cluster=tpu-cluster").out.split()
    assert {"default-pool", "on-demand-pool", "dws-pool"} <= set(listed)
    assert flexq("container", "node-pools", "delete", "on-demand-pool", "--cluster=tpu-cluster", "--quiet").code == 0
    assert flexq("container", "clusters", "delete", "tpu-cluster", *GUIDE_FLAGS, "--quiet").code == 0
    assert flexq("get", "nodepools").err.strip() == "No resources found"


def test_a_create_or_delete_returns_once_its_nodes_are_there_or_gone(flexq: Any) -> None:
    def nodes(pool: str) -> list[str]:
        return flexq("get", "nodes", "-l", f"cloud.google.com/gke-nodepool={pool}", "-o", "name").out.split()

    assert flexq("container", "clusters", "create", "c", "--num-nodes=2", *GUIDE_FLAGS).code == 0
    assert len(nodes("default-pool")) == 2
    assert flexq("container", "node-pools", "create", "np", "--cluster=c", "--num-nodes=3").code == 0
    assert len(nodes("np")) == 3
    assert flexq("container", "node-pools", "delete", "np", "--cluster=c", "--quiet").code == 0
    assert nodes("np") == []
    assert flexq("container", "clusters", "delete", "c", *GUIDE_FLAGS, "--quiet").code == 0
    assert nodes("default-pool") == []


def test_refused_as_gcloud_refuses(flexq: Any) -> None:
    _setup(flexq)
    base = ["container", "node-pools", "create", "p", "--cluster=tpu-cluster", "--machine-type=ct6e-standard-4t",
            "--tpu-topology=4x4", "--num-nodes=0"]
    queued = flexq(*base, "--enable-queued-provisioning", "--max-nodes=4")
    assert queued.code == 1 and "--enable-queued-provisioning requires --enable-autoscaling" in queued.err
    uneven = flexq(*base, "--enable-autoscaling", "--max-nodes=3")
    assert uneven.code == 1 and "--max-nodes=3 is not a multiple of the 4 hosts" in uneven.err
    unknown = flexq("container", "node-pools", "create", "q", "--cluster=tpu-cluster", "--machine-type=ct9-nope")
    assert unknown.code == 1 and "unknown machine type 'ct9-nope'" in unknown.err
    duplicate = flexq("container", "node-pools", "create", "dws-pool", "--cluster=tpu-cluster",
                      "--machine-type=ct6e-standard-4t", "--tpu-topology=4x4", "--enable-autoscaling",
                      "--max-nodes=4", "--num-nodes=0")
    assert duplicate.code == 1 and "code=409" in duplicate.err
    no_cluster = flexq("container", "node-pools", "describe", "dws-pool", "--cluster=other")
    assert no_cluster.code == 1 and "code=404" in no_cluster.err
    assert "Traceback" not in queued.err + uneven.err + unknown.err + duplicate.err + no_cluster.err


def test_a_node_pool_of_an_existing_ray_cluster(flexq: Any) -> None:
    _setup(flexq)
    base = ["container", "node-pools", "create", "ray-a", "--cluster=tpu-cluster"]
    client = flexq(*base, "--ray-address=ray://10.0.0.5:10001")
    assert client.code == 1 and "Traceback" not in client.err
    assert "--ray-address=ray://10.0.0.5:10001 is Ray's client address" in client.err
    assert "--ray-address=http://10.0.0.5:8265" in client.err
    bad = flexq(*base, "--ray-address=10.0.0.5")
    assert bad.code == 1 and "--ray-address=10.0.0.5 is not a Ray dashboard address" in bad.err
    mixed = flexq(*base, "--ray-address=http://10.0.0.5:8265", "--machine-type=ct6e-standard-4t")
    assert mixed.code == 1 and "--machine-type, --num-nodes and --tpu-topology do not apply" in mixed.err
    made = flexq(*base, "--ray-address=http://127.0.0.1:9/")
    assert made.code == 0, made.err
    pool = yaml.safe_load(flexq("get", "nodepool", "ray-a", "-o", "yaml").out)
    assert pool["spec"]["rayAddress"] == "http://127.0.0.1:9" and "machineType" not in pool["spec"]
    assert ["ray-a", "ray-cluster"] in [line.split()[:2] for line in flexq(
        "container", "node-pools", "list", "--cluster=tpu-cluster").out.splitlines()]
    wide = flexq("get", "nodepools", "-o", "wide").out
    assert "RAY ADDRESS" in wide and "http://127.0.0.1:9" in wide
    refused = flexq("apply", "-f", "-", input="apiVersion: flexq.dev/v1alpha1\nkind: NodePool\nmetadata: "
                    "{name: ray-b}\nspec: {cluster: tpu-cluster, rayAddress: 'ray://h:10001'}\n")
    assert refused.code == 1 and "spec.rayAddress" in refused.err and "Traceback" not in refused.err
