"""Kueue's scheduler-performance generator format: the objects it makes, its arrivals, and runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flexq.api.object_errors import ApiError
from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests import forks

DATA = Path(__file__).parent / "data"
SMALL = DATA / "kueue-generator-small.yaml"
BENCH = Path(__file__).parents[2] / "bench" / "kueue"


def _by_kind(objects: Any) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for doc in objects:
        out.setdefault(doc.obj["kind"], {})[doc.obj["metadata"]["name"]] = doc.obj
    return out


def test_objects_match_the_config() -> None:
    scenario = load_scenario(SMALL)
    kinds = _by_kind(scenario.objects)
    assert set(kinds["ResourceFlavor"]) == {"rf"}
    assert set(kinds["ClusterQueue"]) == {"busy-0-0-team-0", "idle-1-0-team-0"}
    busy, idle = kinds["ClusterQueue"]["busy-0-0-team-0"], kinds["ClusterQueue"]["idle-1-0-team-0"]
    assert busy["spec"]["cohortName"] == idle["spec"]["cohortName"] == "team-0"
    assert busy["spec"]["resourceGroups"] == [{"coveredResources": ["cpu"], "flavors": [
        {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "2", "borrowingLimit": "2"}]}]}]
    assert idle["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [{"name": "cpu", "nominalQuota": "2"}]
    assert busy["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert idle["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
    assert kinds["LocalQueue"]["busy-0-0-team-0"]["metadata"]["namespace"] == "busy-0-0-team-0"
    assert kinds["LocalQueue"]["busy-0-0-team-0"]["spec"] == {"clusterQueue": "busy-0-0-team-0"}
    assert set(kinds["Namespace"]) == {"busy-0-0-team-0", "idle-1-0-team-0"}
    assert {n: o["value"] for n, o in kinds["WorkloadPriorityClass"].items()} == {"priority-10": 10,
                                                                                   "priority-100": 100}
    arrivals = [(s.at, s.document.obj["metadata"]["namespace"], s.document.obj["metadata"]["name"], s.run_for)
                for s in scenario.submissions]
    assert arrivals == [(1, "busy-0-0-team-0", "low-0-0-0", 10), (2, "busy-0-0-team-0", "low-0-1-0", 10),
                        (3, "busy-0-0-team-0", "high-1-0-0", 2), (4, "idle-1-0-team-0", "own-0-0-0", 1)]
    job = scenario.submissions[2].document.obj
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "priority-100"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "busy-0-0-team-0"
    assert job["spec"]["parallelism"] == 1
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}


def test_run_borrows_preempts_and_reclaims_as_worked_out_by_hand() -> None:
    result = run_scenario(load_scenario(SMALL))
    names = {w.key: w.owner.split("/")[-1] for w in result.workloads}
    log = [(e["t"], e["event"], names[e["workload"]]) for e in result.events
           if e["event"] in ("Admitted", "Preempted", "Finished")]
    assert log == [
        (1, "Admitted", "low-0-0-0"),
        (2, "Admitted", "low-0-1-0"),        # borrows idle's 2 cpu (borrowingLimit 2)
        (3, "Preempted", "low-0-1-0"),       # high priority, within the queue: the newest low one goes
        (3, "Admitted", "high-1-0-0"),
        (4, "Preempted", "low-0-0-0"),       # idle reclaims what it lent: the lower priority one goes
        (4, "Admitted", "own-0-0-0"),
        (5, "Finished", "high-1-0-0"),
        (5, "Finished", "own-0-0-0"),
        (5, "Admitted", "low-0-1-0"),
        (5, "Admitted", "low-0-0-0"),
        (15, "Finished", "low-0-1-0"),       # a preempted workload runs its full runtimeMs again
        (15, "Finished", "low-0-0-0"),
    ]


def test_scenario_entry_adds_the_queues_and_shifts_the_arrivals(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(f"""
apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {{name: with-generator}}
spec:
  submit:
    - {{generator: {SMALL}, at: 1m}}
""")
    scenario = load_scenario(path)
    assert [s.at for s in scenario.submissions] == [61, 62, 63, 64]
    assert len(_by_kind(scenario.objects)["ClusterQueue"]) == 2
    assert [row["finished"] for row in run_scenario(scenario).summary()["workloads"]] == [75, 75, 65, 65]


def test_simulate_takes_a_generator_config_directly(tmp_path: Path) -> None:
    proc = forks.run(["simulate", str(SMALL), "-o", "json"], text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["workloads"]
    assert [(r["job"].split("/")[-1], r["state"], r["finished"]) for r in rows] == [
        ("low-0-0-0", "Finished", 15), ("low-0-1-0", "Finished", 15), ("high-1-0-0", "Finished", 5),
        ("own-0-0-0", "Finished", 5)]


@pytest.mark.parametrize(("config", "file", "queues", "workloads", "last_arrival"), [
    ("baseline.yaml", "configs/baseline/generator.yaml", 30, 15_000, 60.0),
    ("large-scale.yaml", "configs/large-scale/generator.yaml", 1_000, 50_000, 3.3),
])
def test_kueue_configs_load(config: str, file: str, queues: int, workloads: int, last_arrival: float) -> None:
    path = BENCH / config
    assert f"test/performance/scheduler/{file}" in path.read_text(), "the copy cites its upstream file"
    scenario = load_scenario(path)  # how fast: bench/sim_bench.py
    assert len(_by_kind(scenario.objects)["ClusterQueue"]) == queues
    assert len(scenario.submissions) == workloads
    assert scenario.submissions[-1].at == last_arrival, "the 350 x 100 ms or 35 x 60 ms series ends last"


@pytest.mark.parametrize(("text", "message"), [
    ("cohorts: []\n", "line 1: cohorts: Required value: must have at least 1 item"),
    ("cohorts:\n  - className: c\n    count: 1\n    queuesSets:\n"
     "      - {className: q, count: 1, nominalQuota: lots}\n",
     "line 5: cohorts[0].queuesSets[0].nominalQuota: "),
    ("cohorts:\n  - className: c\n    count: 1\n    queuesSets:\n      - {className: q, count: 1, nominalQuota: 1,\n"
     "         withinClusterQueue: Sometimes}\n", "line 6: cohorts[0].queuesSets[0].withinClusterQueue: "),
    ("cohorts:\n  - className: c\n    count: 1\n    queuesSets:\n      - {className: Q, count: 1, nominalQuota: 1}\n",
     ":5: cohorts[0].queuesSets[0].className: the ClusterQueue name \"Q-0-0-c-0\""),
    ("cohorts:\n  - {className: c, count: 1, queuesSets: [{className: q, count: 1, nominalQuota: 1}]}\n"
     "  - {className: c, count: 1, queuesSets: [{className: q, count: 1, nominalQuota: 1}]}\n",
     ":3: cohorts[1].queuesSets[0]: ClusterQueue 'q-0-0-c-0' is made twice"),
    ("topology: {name: t}\ncohorts: []\n", ":1: topology: topology-aware scheduling configs are not supported"),
    ("cohorts:\n  - className: c\n    count: 1\n    queuesSets:\n      - className: q\n        count: 1\n"
     "        nominalQuota: 1\n        workloadsSets:\n          - count: 1\n            workloads:\n"
     "              - {className: w, request: 1, tasLevel: rack}\n",
     ":11: cohorts[0].queuesSets[0].workloadsSets[0].workloads[0].tasLevel: topology-aware"),
])
def test_bad_configs_name_the_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "generator.yaml"
    path.write_text(text)
    with pytest.raises(ApiError) as caught:
        load_scenario(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


def test_waits_are_reported_per_workload_class() -> None:
    from flexq.sim.report import summarize

    result = run_scenario(load_scenario(SMALL))
    numbers = summarize(result.summary()["workloads"], result.events, set())
    by_class = numbers["waitByClass"]
    assert {c: s["jobs"] for c, s in by_class.items()} == {"high": 1, "low": 2, "own": 1}
    assert all(s["max"] == 0 for s in by_class.values())  # each started when it arrived (see the run above)
    assert numbers["preemptions"] == 2
