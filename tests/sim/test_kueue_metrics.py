"""Kueue's metrics from the simulator (``flexq simulate --metrics``): every metric Kueue has that means something in
flexq, under Kueue's name, type, help, labels and buckets (checked against Kueue's own list), with the values the
scenario's story gives."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests import forks
from tests.kueue_metrics import check_scrape

SCENARIO = """
apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {name: kueue-metrics}
spec:
  objects:
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: default}}
    - {apiVersion: kueue.x-k8s.io/v1beta2, kind: Cohort, metadata: {name: org}}
    - {apiVersion: kueue.x-k8s.io/v1beta2, kind: Cohort, metadata: {name: team}, spec: {parentName: org}}
    - apiVersion: kueue.x-k8s.io/v1beta1
      kind: ClusterQueue
      metadata: {name: a}
      spec:
        cohort: team
        namespaceSelector: {}
        preemption: {withinClusterQueue: LowerPriority}
        resourceGroups:
          - coveredResources: [cpu]
            flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4, borrowingLimit: 0}]}]
    - apiVersion: kueue.x-k8s.io/v1beta1
      kind: ClusterQueue
      metadata: {name: b}
      spec:
        cohort: team
        namespaceSelector: {}
        resourceGroups:
          - coveredResources: [cpu]
            flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2, lendingLimit: 1}]}]
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: qa, namespace: default},
       spec: {clusterQueue: a}}
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: qb, namespace: default},
       spec: {clusterQueue: b}}
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: WorkloadPriorityClass, metadata: {name: urgent}, value: 100}
  submit:
    - {at: 0s, count: 2, every: 1s, runFor: 10h, object: {apiVersion: batch/v1, kind: Job,
       metadata: {name: "batch-${INDEX}", labels: {kueue.x-k8s.io/queue-name: qa}}, spec: &two
       {parallelism: 2, template: {spec: {restartPolicy: Never,
        containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}}}}
    - {at: 10m, count: 2, every: 20m, runFor: 10m, object: {apiVersion: batch/v1, kind: Job, spec: *two,
       metadata: {name: "hot-${INDEX}", labels: {kueue.x-k8s.io/queue-name: qa,
                                                 kueue.x-k8s.io/priority-class: urgent}}}}
    - {at: 0s, runFor: 10h, object: {apiVersion: batch/v1, kind: Job, spec: *two, metadata: {name: capped,
       labels: {kueue.x-k8s.io/queue-name: qb, kueue.x-k8s.io/max-exec-time-seconds: "60"}}}}
    - {at: 5m, runFor: 1h, podsReadyAfter: 30s, object: {apiVersion: batch/v1, kind: Job, spec: *two,
       metadata: {name: waits, labels: {kueue.x-k8s.io/queue-name: qb}}}}
    - {at: 1m, runFor: 1h, object: {apiVersion: batch/v1, kind: Job, metadata: {name: huge, labels:
       {kueue.x-k8s.io/queue-name: qb}}, spec: {parallelism: 1, template: {spec: {restartPolicy: Never,
        containers: [{name: c, image: x, resources: {requests: {cpu: "50"}}}]}}}}}
  until: 3h
"""


def _scrape(tmp_path: Path) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    out = tmp_path / "metrics.txt"
    proc = forks.run(["simulate", str(path), "--metrics", str(out), "--no-progress"], text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    samples = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "replica_role"))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    return text, samples


def test_the_simulator_writes_every_kueue_metric_as_kueue_defines_it(tmp_path: Path) -> None:
    text, _ = _scrape(tmp_path)
    # Slices are replaced only when an elastic job grows (tests/runtime/test_elastic*.py): none does here. LocalQueues'
    # admission fair sharing usage is there only with admissionFairSharing (tests/control/test_same_story.py), the
    # weighted shares under fair sharing only (tests/control/test_same_story.py), as Kueue's.
    assert check_scrape(text, need_samples=True, samples_not_needed=frozenset({
        "kueue_replaced_workload_slices_total", "kueue_local_queue_admission_fair_sharing_usage",
        "kueue_cluster_queue_weighted_share", "kueue_cohort_weighted_share"})) == []
    assert 'replica_role="standalone"' in text


def test_the_figures_tell_the_scenarios_story(tmp_path: Path) -> None:
    _, m = _scrape(tmp_path)
    expected = {
        # batch-1 (admitted last) is preempted by hot-0 at 10m and admitted again when it finishes at 20m; hot-1
        # preempts it again at 30m, and it comes back at 40m: two evictions, counted once by the "once" counter.
        ("kueue_admitted_workloads_total", (("cluster_queue", "a"), ("priority_class", ""))): 4,
        ("kueue_admitted_workloads_total", (("cluster_queue", "a"), ("priority_class", "urgent"))): 2,
        ("kueue_evicted_workloads_total", (("cluster_queue", "a"), ("priority_class", ""), ("reason", "Preempted"),
                                           ("underlying_cause", ""))): 2,
        ("kueue_evicted_workloads_once_total", (("cluster_queue", "a"), ("priority_class", ""),
                                                ("reason", "Preempted"), ("underlying_cause", ""))): 1,
        ("kueue_preempted_workloads_total", (("preempting_cluster_queue", "a"), ("reason", "InClusterQueue"))): 2,
        # capped runs past its 60 s: deactivated, as Kueue labels it; waits then takes b's quota.
        ("kueue_evicted_workloads_total", (("cluster_queue", "b"), ("priority_class", ""), ("reason", "Deactivated"),
                                           ("underlying_cause", "MaximumExecutionTimeExceeded"))): 1,
        ("kueue_local_queue_evicted_workloads_total", (("name", "qb"), ("namespace", "default"),
                                                       ("priority_class", ""), ("reason", "Deactivated"),
                                                       ("underlying_cause", "MaximumExecutionTimeExceeded"))): 1,
        ("kueue_finished_workloads_total", (("cluster_queue", "a"), ("priority_class", "urgent"))): 2,
        ("kueue_local_queue_admitted_workloads_total", (("name", "qa"), ("namespace", "default"),
                                                        ("priority_class", "urgent"))): 2,
        ("kueue_admitted_active_workloads", (("cluster_queue", "a"),)): 2,
        ("kueue_cluster_queue_resource_usage", (("cluster_queue", "a"), ("cohort", "team"), ("flavor", "default"),
                                                ("resource", "cpu"))): 4.0,
        ("kueue_cluster_queue_borrowing_limit", (("cluster_queue", "a"), ("cohort", "team"), ("flavor", "default"),
                                                 ("resource", "cpu"))): 0.0,
        ("kueue_cluster_queue_borrowing_limit", (("cluster_queue", "b"), ("cohort", "team"), ("flavor", "default"),
                                                 ("resource", "cpu"))): float("inf"),
        ("kueue_cluster_queue_lending_limit", (("cluster_queue", "b"), ("cohort", "team"), ("flavor", "default"),
                                               ("resource", "cpu"))): 1.0,
        ("kueue_cohort_subtree_quota", (("cohort", "org"), ("flavor", "default"), ("resource", "cpu"))): 6.0,
        ("kueue_cohort_info", (("cohort", "team"), ("parent_cohort", "org"), ("root_cohort", "org"))): 1,
        ("kueue_cluster_queue_info", (("cluster_queue", "b"), ("parent_cohort", "team"), ("root_cohort", "org"))): 1,
        ("kueue_cohort_subtree_admitted_workloads_total", (("cohort", "org"), ("priority_class", ""))): 6,
        ("kueue_cohort_subtree_admitted_workloads_total", (("cohort", "team"), ("priority_class", "urgent"))): 2,
        ("kueue_local_queue_status", (("active", "True"), ("name", "qb"), ("namespace", "default"))): 1,
        # waitForPodsReady (on by default): batch-1's pods are ready as it is admitted again, each time 600 s after
        # its eviction; waits' pods 30 s after its admission (podsReadyAfter).
        ("kueue_ready_wait_time_seconds_count", (("cluster_queue", "a"), ("priority_class", ""))): 4,
        ("kueue_ready_wait_time_seconds_sum", (("cluster_queue", "a"), ("priority_class", ""))): 1200.0,
        ("kueue_admitted_until_ready_wait_time_seconds_sum", (("cluster_queue", "a"), ("priority_class", ""))): 0.0,
        ("kueue_admitted_until_ready_wait_time_seconds_sum", (("cluster_queue", "b"), ("priority_class", ""))): 30.0,
        ("kueue_local_queue_admitted_until_ready_wait_time_seconds_count", (("name", "qb"), ("namespace", "default"),
                                                                            ("priority_class", ""))): 2,
        ("kueue_local_queue_ready_wait_time_seconds_sum", (("name", "qa"), ("namespace", "default"),
                                                          ("priority_class", ""))): 1200.0,
        # batch-1 ran 599 s (ready 1 s after 0) and 600 s before its two preemptions; capped 60 s before its
        # deactivation.
        ("kueue_pods_ready_to_evicted_time_seconds_sum", (("cluster_queue", "a"), ("reason", "Preempted"),
                                                          ("underlying_cause", ""))): 1199.0,
        ("kueue_pods_ready_to_evicted_time_seconds_count", (("cluster_queue", "b"), ("reason", "Deactivated"),
                                                            ("underlying_cause", "MaximumExecutionTimeExceeded"))): 1,
        # huge asks for more than b and its cohort have: pending for good.
        ("kueue_cluster_queue_resource_pending", (("cluster_queue", "b"), ("resource", "cpu"))): 50.0,
        ("kueue_pending_workloads", (("cluster_queue", "b"), ("status", "inadmissible"))): 1,
        ("kueue_local_queue_pending_workloads", (("name", "qb"), ("namespace", "default"),
                                                 ("status", "inadmissible"))): 1,
    }
    assert {key: m.get(key) for key in expected} == expected


def test_metrics_into_a_directory_is_refused_before_the_run(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    events = tmp_path / "events.jsonl"
    proc = forks.run(["simulate", str(path), "--metrics", str(tmp_path),
                     "--events", str(events), "--no-progress"], text=True, timeout=60)
    assert proc.returncode == 1 and f"--metrics {tmp_path}: a directory" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not events.exists(), "nothing written"
