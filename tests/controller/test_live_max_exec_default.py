"""A ClusterQueue's default maximum execution time (KEP-7029, served as an alpha under the
``ClusterQueueMaxExecutionTime`` gate) on the live server, with the real kubectl: the ClusterQueue's
``spec.workloadDefaults.maximumExecutionTimeSeconds`` is applied as written, and a Job that says nothing gets a
Workload with that ``spec.maximumExecutionTimeSeconds``, one labelled keeps its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Server
from tests.queues import queue_yaml
from tests.support import eventually_value, job, serve_kueue_config

CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {ClusterQueueMaxExecutionTime: true}
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    yield from serve_kueue_config(tmp_path, CONFIG)


def _queues() -> str:
    docs = list(yaml.safe_load_all(queue_yaml(("default-flavor", None))))
    next(d for d in docs if d["kind"] == "ClusterQueue")["spec"]["workloadDefaults"] = {
        "maximumExecutionTimeSeconds": 600}
    return yaml.safe_dump_all(docs)


def test_a_job_without_its_own_limit_takes_the_cluster_queues_default(kubectl: Any) -> None:
    assert kubectl("apply", "-f", "-", input=_queues()).code == 0
    shown = kubectl("get", "clusterqueue", "cq", "-o", "jsonpath={.spec.workloadDefaults}")
    assert json.loads(shown.out) == {"maximumExecutionTimeSeconds": 600}
    labelled: dict[str, Any] = job("labelled", queue="q", cpu="1").object()
    labelled["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "60"
    for made in (job("plain", queue="q", cpu="1").object(), labelled):
        assert kubectl("create", "-f", "-", input=yaml.safe_dump(made)).code == 0

    def limits() -> dict[str, int]:
        listed = json.loads(kubectl("get", "workloads", "-o", "json").out)["items"]
        found = {w["metadata"]["ownerReferences"][0]["name"]: w["spec"].get("maximumExecutionTimeSeconds")
                 for w in listed}
        assert len(found) == 2
        return found

    assert eventually_value(limits) == {"plain": 600, "labelled": 60}
