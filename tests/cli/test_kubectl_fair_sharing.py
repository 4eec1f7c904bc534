"""Admission fair sharing on a live server, read with the real kubectl: a LocalQueue's ``status.fairSharing`` as
Kueue writes it, its usage there once a job of it is admitted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.api import parse_quantity
from tests.conftest import Server
from tests.support import eventually_value, serve_kueue_config

CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations: {frameworks: [batch/job]}
admissionFairSharing: {usageHalfLifeTime: 1h, usageSamplingInterval: 1s}
"""
QUEUES = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: shared}
spec:
  namespaceSelector: {}
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: default}
spec: {clusterQueue: shared, fairSharing: {weight: "2"}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: default, labels: {kueue.x-k8s.io/queue-name: team-a}}
spec:
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server reading the Configuration above."""
    yield from serve_kueue_config(tmp_path, CONFIG)


def test_kubectl_shows_the_local_queues_admission_fair_sharing_status(kubectl: Any) -> None:
    applied = kubectl("apply", "-f", "-", input=QUEUES)
    assert applied.code == 0, applied.err

    def used() -> dict[str, Any] | None:
        got = kubectl("get", "localqueue", "team-a", "-o", "yaml")
        assert got.code == 0, got.err
        status = (yaml.safe_load(got.out).get("status") or {}).get("fairSharing")
        consumed = ((status or {}).get("admissionFairSharingStatus") or {}).get("consumedResources") or {}
        return status if parse_quantity(consumed.get("cpu", "0")).value > 0 else None

    status = eventually_value(used, timeout=60)
    assert status["weightedShare"] == 0
    kept = status["admissionFairSharingStatus"]
    assert set(kept) == {"consumedResources", "lastUpdate"} and kept["lastUpdate"].endswith("Z")
    assert 0 < parse_quantity(kept["consumedResources"]["cpu"]).value < 2  # decaying towards the 2 cpu admitted

