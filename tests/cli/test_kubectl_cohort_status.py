"""Fair sharing on a live server, read with the real kubectl: a Cohort's ``status.fairSharing`` as Kueue's cohort
reconciler writes it, and a Workload's ``status.schedulingStats`` once it was evicted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Server
from tests.support import eventually, eventually_value, serve_kueue_config

COHORTS = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: shared}
spec: {parentName: org, fairSharing: {weight: "2"}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  cohortName: shared
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team, namespace: default}
spec: {clusterQueue: team}
---
apiVersion: batch/v1
kind: Job
metadata: {name: wide, namespace: default, labels: {kueue.x-k8s.io/queue-name: team}}
spec:
  parallelism: 5
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""
FAIR = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations: {frameworks: [batch/job]}
fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server with fair sharing on."""
    yield from serve_kueue_config(tmp_path, FAIR)


def test_kubectl_shows_a_cohorts_weighted_share_and_a_workloads_evictions(kubectl: Any) -> None:
    applied = kubectl("apply", "-f", "-", input=COHORTS)
    assert applied.code == 0, applied.err

    def status(kind: str, name: str, field: str) -> Any:
        got = kubectl("get", kind, name, "-o", "yaml")
        assert got.code == 0, got.err
        return (yaml.safe_load(got.out).get("status") or {}).get(field)

    def shared_share(expected: int) -> None:
        assert status("cohort", "shared", "fairSharing") == {"weightedShare": expected}

    # shared's subtree holds 2 and uses 5 once the job is admitted (0 before: its status may be read first): it
    # borrows 3 of the 6 org could lend, at weight 2: 250.
    eventually(lambda: shared_share(250), timeout=60)
    assert status("cohort", "org", "fairSharing") == {"weightedShare": 0}  # a root has no share
    workload = eventually_value(lambda: next(iter(yaml.safe_load(kubectl(
        "get", "workloads", "-o", "yaml").out)["items"]), None), timeout=60)["metadata"]["name"]
    patched = kubectl("patch", "workload", workload, "--type=merge", "-p", '{"spec": {"active": false}}')
    assert patched.code == 0, patched.err
    assert eventually_value(lambda: status("workload", workload, "schedulingStats"), timeout=60) == {
        "evictions": [{"reason": "Deactivated", "underlyingCause": "", "count": 1}]}
    eventually(lambda: shared_share(0), timeout=60)
