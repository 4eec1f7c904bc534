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
