"""Trace files (CSV and JSON lines) as a scenario's arrivals: jobs made from rows, waits, and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flexq.sim.runner import SimResult, run_scenario
from flexq.sim.scenario import ScenarioError, load_scenario
from tests.conftest import GUIDE

QUEUES = """
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: default}}
    - apiVersion: kueue.x-k8s.io/v1beta1
      kind: ClusterQueue
      metadata: {name: cq}
      spec:
        namespaceSelector: {}
        resourceGroups:
          - coveredResources: [cpu, memory]
            flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 8Gi}]}]
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: q, namespace: team-a},
       spec: {clusterQueue: cq}}
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: WorkloadPriorityClass, metadata: {name: urgent}, value: 100}
"""

# Quota is 4 cpu. Job 1 takes all of it for 10 minutes; jobs 2 (2 pods x 1 cpu) and 3 (2 cpu) arrive at
# 1m and 2m, wait for it, and start together at 10m: waits 0, 540 s and 480 s.
CSV = """\
# arrivals for the hand-checked run
at,runFor,queue,namespace,name,cpu,memory,pods,priority
0s,10m,q,team-a,first,4,1Gi,,
60,5m,q,team-a,second,1,,2,urgent

2m,1m,q,team-a,,2,512Mi,,
"""
ROWS: list[dict[str, Any]] = [
    {"at": "0s", "runFor": "10m", "queue": "q", "namespace": "team-a", "name": "first", "cpu": 4, "memory": "1Gi"},
    {"at": 60, "runFor": "5m", "queue": "q", "namespace": "team-a", "name": "second", "cpu": "1", "pods": 2,
     "priority": "urgent"},
    {"at": "2m", "runFor": 60, "queue": "q", "namespace": "team-a", "cpu": 2, "memory": "512Mi", "priority": None},
]


def _scenario(tmp_path: Path, submit: str, objects: str = QUEUES, extra: str = "") -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(f"""
apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {{name: traces}}
spec:
  objects:
{objects}
  submit:
{submit}
{extra}
""")
    return path


def _waits(result: SimResult) -> dict[str, Any]:
    return {row["job"].split("/")[-1]: row["wait"] for row in result.summary()["workloads"]}


def test_csv_trace_gives_the_waits_computed_by_hand(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text(CSV)
    scenario = load_scenario(_scenario(tmp_path, "    - {trace: jobs.csv}"))
    assert [s.at for s in scenario.submissions] == [0, 60, 120]
    assert [s.run_for for s in scenario.submissions] == [600, 300, 60]
    second = scenario.submissions[1].document
    assert second.source == str(tmp_path / "jobs.csv") and second.line == 4
    assert second.obj["metadata"] == {"name": "second", "namespace": "team-a", "labels": {
        "kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "urgent"}}
    assert second.obj["spec"]["parallelism"] == 2
    pod = second.obj["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert "tolerations" not in pod
    assert scenario.submissions[2].document.obj["metadata"]["name"] == "jobs-2", "unnamed rows: <trace>-<row>"
    result = run_scenario(scenario)
    assert _waits(result) == {"first": 0, "second": 540, "jobs-2": 480}
    finished = {row["job"].split("/")[-1]: row["finished"] for row in result.summary()["workloads"]}
    assert finished == {"first": 600, "second": 900, "jobs-2": 660}


def test_jsonl_trace_runs_like_the_csv_one_and_shifts_by_the_entry_at(tmp_path: Path) -> None:
    (tmp_path / "jobs.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    result = run_scenario(load_scenario(_scenario(tmp_path, "    - {trace: jobs.jsonl, at: 1h}")))
    rows = {row["job"].split("/")[-1]: row for row in result.summary()["workloads"]}
    assert {k: r["submitted"] for k, r in rows.items()} == {"first": 3600, "second": 3660, "jobs-2": 3720}
    assert {k: r["wait"] for k, r in rows.items()} == {"first": 0, "second": 540, "jobs-2": 480}


def test_template_rows_substitute_the_other_columns(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "job.yaml").write_text("""
apiVersion: batch/v1
kind: Job
metadata:
  name: train-${JOB_ID}
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: "${QUEUE}"}
spec:
  parallelism: ${PODS}
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
""")
    (tmp_path / "traces" / "jobs.csv").write_text("at,runFor,file,JOB_ID,PODS\n"
                                                  "0,1h,job.yaml,7,4\n30s,1h,job.yaml,8,1\n")
    scenario = load_scenario(_scenario(tmp_path, "    - {trace: traces/jobs.csv, env: {QUEUE: q}}"))
    docs = [s.document for s in scenario.submissions]
    assert [d.obj["metadata"]["name"] for d in docs] == ["train-7", "train-8"]
    assert [d.obj["spec"]["parallelism"] for d in docs] == [4, 1]
    assert _waits(run_scenario(scenario)) == {"train-7": 0, "train-8": 3570}


def test_tpu_rows_tolerate_the_tpu_taint_and_run_on_the_guide_pools(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text(
        "at,runFor,queue,tpu,cpu,pods,nodeSelector\n"
        "0,1h,user-queue,4,1,4,cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice;"
        "cloud.google.com/gke-tpu-topology=4x4\n")
    path = _scenario(tmp_path, "    - {trace: jobs.csv}", objects="    []", extra=f"""
  env: {{ONDEMAND_NODEPOOL: on-demand-pool, DWS_NODEPOOL: dws-pool}}
  include: [{GUIDE / 'dws-tpu-queue.yaml'}]
  capacity:
    pools:
      - {{name: on-demand-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, maxNodes: 4}}
      - {{name: dws-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, maxNodes: 4, flexStart: true,
         queuedProvisioning: true}}
    cloud:
      on-demand-pool: {{bootTime: 3m}}
  until: 2h""")
    scenario = load_scenario(path)
    pod = scenario.submissions[0].document.obj["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                   "cloud.google.com/gke-tpu-topology": "4x4"}
    assert pod["containers"][0]["resources"]["requests"] == {"google.com/tpu": "4", "cpu": "1"}
    result = run_scenario(scenario)
    started = next(e for e in result.events if e["event"] == "Started")
    assert started["t"] == 180 and len(started["nodes"]) == 4
    assert all("on-demand-pool" in n for n in started["nodes"])


@pytest.mark.parametrize(("name", "text", "message"), [
    ("jobs.csv", "at,runFor,queue,cpu\n0,1h,q,1\n1m,1h,q,lots\n",
     "jobs.csv:3: column 'cpu': invalid quantity"),
    ("jobs.csv", "at,runFor,queue,cpu\n0,soon,q,1\n", "jobs.csv:2: column 'runFor': invalid duration 'soon'"),
    ("jobs.csv", "at,queue,cpus\n0,q,1\n", "jobs.csv:2: column 'cpus': unknown"),
    ("jobs.csv", "runFor,queue,cpu\n1h,q,1\n", "jobs.csv:1: header: no 'at' column"),
    ("jobs.csv", "at,cpu\n0,1,2\n", "jobs.csv:2: 3 cells, but the header names 2 columns"),
    ("jobs.csv", "at,queue\n0,q\n", "jobs.csv:2: no resources"),
    ("jobs.csv", "at,cpu,pods\n0,1,0\n", "jobs.csv:2: column 'pods': expected at least 1 pod"),
    ("jobs.csv", "at,cpu,name\n0,1,Big_Job\n", "jobs.csv:2: column 'name': \"Big_Job\": a lowercase RFC 1123"),
    ("jobs.csv", "at,cpu,nodeSelector\n0,1,pool\n", "jobs.csv:2: column 'nodeSelector': expected key=value"),
    ("jobs.csv", "at,file\n0,missing.yaml\n", "jobs.csv:2: column 'file': "),
    ("jobs.jsonl", '{"at": 0, "cpu": 1}\n{"at": 1, "cpu": 1,}\n', "jobs.jsonl:2: malformed JSON at column 20"),
    ("jobs.jsonl", '{"at": 0, "cpu": 1}\n\n{"cpu": 1}\n', "jobs.jsonl:3: no key 'at'"),
    ("jobs.jsonl", '[1, 2]\n', "jobs.jsonl:1: expected a JSON object"),
    ("jobs.jsonl", '{"at": 0, "cpu": -1}\n', "jobs.jsonl:1: key 'cpu': invalid quantity '-1': must not be negative"),
    ("jobs.txt", "at,cpu\n0,1\n", "a trace file ends in .csv, .jsonl or .ndjson"),
])
def test_trace_errors_name_the_file_line_and_column(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(_scenario(tmp_path, f"    - {{trace: {name}}}"))
    assert message in str(caught.value)
    if name.endswith(".txt"):
        assert str(caught.value).startswith(f"{tmp_path / 'scenario.yaml'}:")
    else:
        assert str(caught.value).startswith(str(tmp_path / name))


def test_template_placeholder_without_a_column_is_named(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j-${JOB_ID}\n")
    (tmp_path / "jobs.csv").write_text("at,file\n0,job.yaml\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(_scenario(tmp_path, "    - {trace: jobs.csv}"))
    assert str(caught.value).startswith(f"{tmp_path / 'jobs.csv'}:2: column 'file': ")
    assert "${JOB_ID} (line 4); add a column for each" in str(caught.value)


def test_trace_entries_take_no_count_or_run_time(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text(CSV)
    with pytest.raises(ScenarioError, match=r"spec.submit\[0\].count: not allowed with trace"):
        load_scenario(_scenario(tmp_path, "    - {trace: jobs.csv, count: 3}"))
    with pytest.raises(ScenarioError, match="give exactly one of file, object, trace or generator"):
        load_scenario(_scenario(tmp_path, "    - {trace: jobs.csv, file: job.yaml}"))


def test_a_job_sharing_a_checked_template_still_has_its_name_checked(tmp_path: Path) -> None:
    # Annotations: jobs alike in everything but their name share one checked template (a cache by content).
    job = ("{apiVersion: batch/v1, kind: Job, metadata: {name: NAME, namespace: team-a, annotations: {a: b}, labels: "
           "{kueue.x-k8s.io/queue-name: q}}, spec: {template: {spec: {containers: [{name: c, image: x, "
           "resources: {requests: {cpu: 1}}}], restartPolicy: Never}}}}")
    path = _scenario(tmp_path, f"""    - {{at: 0s, runFor: 1m, object: {job.replace("NAME", "first")}}}
    - {{at: 1s, runFor: 1m, object: {job.replace("NAME", "bad..name")}}}""")
    with pytest.raises(ScenarioError, match=r"metadata\.name: \"bad\.\.name\""):
        run_scenario(load_scenario(path))
