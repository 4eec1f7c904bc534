"""A ClusterQueue's stopPolicy in a scenario: under Hold the queue admits nothing, and every workload in it says why
(Kueue's workload controller: QuotaReserved=False, Suspended, ``ClusterQueue NAME is inactive``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests.queues import queue_yaml
from tests.support import job


def _run(tmp_path: Path, policy: str) -> list[dict[str, object]]:
    queues = queue_yaml(("default-flavor", None)).replace("  namespaceSelector: {}\n",
                                                          f"  namespaceSelector: {{}}\n  stopPolicy: {policy}\n")
    scenario = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "stopped"},
                "spec": {"objects": list(yaml.safe_load_all(queues)),
                         "submit": [{"at": "0s", "runFor": "1m", "object": job(name, queue="q", cpu="1").object()}
                                    for name in ("a", "b")],
                         "until": "10m"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return run_scenario(load_scenario(path)).events


def test_a_held_cluster_queue_admits_nothing_and_each_of_its_workloads_says_so(tmp_path: Path) -> None:
    events = _run(tmp_path, "Hold")
    assert not [e for e in events if e["event"] in ("QuotaReserved", "Admitted")]
    pending = sorted((str(e["workload"]).split("/")[1].removeprefix("job-").rsplit("-", 1)[0], e["reason"])
                     for e in events if e["event"] == "Pending")
    assert pending == [("a", "ClusterQueue cq is inactive"), ("b", "ClusterQueue cq is inactive")]


def test_without_a_stop_policy_both_run(tmp_path: Path) -> None:
    events = _run(tmp_path, "None")
    assert len([e for e in events if e["event"] == "Finished"]) == 2
