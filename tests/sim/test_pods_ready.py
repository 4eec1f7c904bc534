"""Kueue's waitForPodsReady in a scenario: a job whose pods never become ready (``podsReadyAfter: never``) is evicted
``PodsReadyTimeout`` after the timeout, requeued after Kueue's doubling backoff, and deactivated once it would be
requeued more than ``backoffLimitCount`` times; a job ready within the timeout runs its course."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.api import InvalidObject
from flexq.sim.runner import run_scenario
from flexq.sim.scenario import ScenarioError, load_scenario
from tests.queues import queue_yaml
from tests.support import job

CONFIG = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
          "waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffBaseSeconds": 60,
                                                                      "backoffLimitCount": 2}}}


def _scenario(tmp_path: Path, submit: list[dict[str, Any]], config: Any = None, cpu: int = 4) -> Path:
    spec: dict[str, Any] = {"objects": list(yaml.safe_load_all(queue_yaml(("default-flavor", None), cpu=cpu))),
                            "submit": submit, "until": "2h"}
    if config is not None:
        spec["kueueConfig"] = config
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario",
                                    "metadata": {"name": "pods-ready"}, "spec": spec}))
    return path


def _story(path: Path) -> list[tuple[float, str, str, str]]:
    return [(e["t"], e["event"], str(e["workload"]).split("/")[1].removeprefix("job-").rsplit("-", 1)[0],
             str(e.get("cause", e["reason"]))) for e in run_scenario(load_scenario(path)).events
            if e["event"] in ("Admitted", "Evicted", "Requeued", "Deactivated", "Finished")]


def test_a_job_never_ready_is_evicted_requeued_with_backoff_and_deactivated_past_the_limit(tmp_path: Path) -> None:
    path = _scenario(tmp_path, [
        {"at": "0s", "runFor": "1h", "podsReadyAfter": "never", "object": job("stuck", queue="q", cpu="2").object()},
        {"at": "0s", "runFor": "20m", "podsReadyAfter": "4m", "object": job("slow", queue="q", cpu="2").object()},
        {"at": "1m", "runFor": "2m", "object": job("next", queue="q", cpu="2").object()}], CONFIG)
    timed_out = "PodsReadyTimeout"
    assert _story(path) == [
        (0, "Admitted", "stuck", "The workload is admitted"),
        (0, "Admitted", "slow", "The workload is admitted"),
        (300, "Evicted", "stuck", timed_out),  # 5 min without its pods ready; "slow" was ready at 4 min
        (300, "Admitted", "next", "The workload is admitted"),  # the quota it held goes to the next in line
        (360, "Requeued", "stuck", "Backoff finished"),  # 60 s: the first backoff
        (420, "Finished", "next", "JobFinished"),
        (420, "Admitted", "stuck", "The workload is admitted"),
        (720, "Evicted", "stuck", timed_out),
        (840, "Requeued", "stuck", "Backoff finished"),  # 120 s: doubled
        (840, "Admitted", "stuck", "The workload is admitted"),
        (1140, "Evicted", "stuck", "DeactivatedDueToRequeuingLimitExceeded"),  # a third time-out: past the limit
        (1140, "Deactivated", "stuck", "The workload is deactivated due to exceeding the maximum number of "
                                       "re-queuing retries"),
        (1200, "Finished", "slow", "JobFinished")]


def test_a_workloads_scheduling_stats_count_its_evictions_by_reason_and_underlying_cause(tmp_path: Path) -> None:
    # Kueue's status.schedulingStats.evictions: PodsReadyTimeout's cause says its pods never started; the
    # deactivation past the limit counts under Deactivated with the cause its condition names.
    path = _scenario(tmp_path, [
        {"at": "0s", "runFor": "1h", "podsReadyAfter": "never", "object": job("stuck", queue="q", cpu="2").object()},
        {"at": "0s", "runFor": "1h", "object": job("fine", queue="q", cpu="2").object()}], CONFIG)
    rows = {row["job"]: row for row in run_scenario(load_scenario(path)).summary()["workloads"]}
    assert {job: row.get("schedulingStats") for job, row in rows.items()} == {
        "Job default/fine": None,
        "Job default/stuck": {"evictions": [
            {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 2},
            {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1}]}}


def test_without_a_configuration_kueue_v0_19s_default_applies_30_minutes_and_endless_requeues(tmp_path: Path) -> None:
    path = _scenario(tmp_path, [
        {"at": "0s", "runFor": "2h", "podsReadyAfter": "never", "object": job("stuck", queue="q", cpu="2").object()},
        {"at": "0s", "runFor": "1h", "podsReadyAfter": "29m", "object": job("slow", queue="q", cpu="2").object()}])
    # "slow" is ready a minute before the 30 minutes are up: it runs its hour
    story = _story(path)
    assert story[:8] == [
        (0, "Admitted", "stuck", "The workload is admitted"), (0, "Admitted", "slow", "The workload is admitted"),
        (1800, "Evicted", "stuck", "PodsReadyTimeout"), (1860, "Requeued", "stuck", "Backoff finished"),
        (1860, "Admitted", "stuck", "The workload is admitted"), (3600, "Finished", "slow", "JobFinished"),
        (3660, "Evicted", "stuck", "PodsReadyTimeout"), (3780, "Requeued", "stuck", "Backoff finished")]
    assert "Deactivated" not in {s[1] for s in story}


def test_a_requeued_workload_takes_its_place_by_its_creation_when_the_strategy_says_creation(tmp_path: Path) -> None:
    def order(timestamp: str) -> list[str]:
        config = {**CONFIG, "waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {
            "timestamp": timestamp, "backoffBaseSeconds": 0}}}
        path = _scenario(tmp_path, [
            {"at": "0s", "runFor": "1h", "podsReadyAfter": "never",
             "object": job("stuck", queue="q", cpu="4").object()},
            {"at": "1m", "runFor": "10m", "object": job("later", queue="q", cpu="4").object()}], config)
        return [name for _t, kind, name, _r in _story(path) if kind == "Admitted"][:2]

    # Evicted at 5 min: by its eviction it comes after "later" (queued at 1 min); by its creation, before it.
    assert order("Eviction") == ["stuck", "later"] and order("Creation") == ["stuck", "stuck"]


def test_a_racing_workloads_timer_is_its_own_not_its_variants_and_it_races_again_after_the_backoff(
        tmp_path: Path) -> None:
    objects = list(yaml.safe_load_all(queue_yaml(("first", None), ("second", None), cpu=2)))
    objects[2]["spec"]["concurrentAdmissionPolicy"] = {"migration": {"mode": "TryPreferredFlavors"}}
    objects[2]["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario",
                                    "metadata": {"name": "race"}, "spec": {
                                        "objects": objects, "kueueConfig": CONFIG, "until": "30m", "submit": [
                                            {"at": "0s", "runFor": "1h", "podsReadyAfter": "never",
                                             "object": job("stuck", queue="q", cpu="2").object()}]}}))
    events = run_scenario(load_scenario(path)).events
    timed_out = [e for e in events if e.get("cause") == "PodsReadyTimeout"]
    assert [e["t"] for e in timed_out] == [300, 660]  # 5 min after each admission; the second after 60 s of backoff
    assert all("/job-stuck-" in e["workload"] and "-variant-" not in e["workload"] for e in timed_out), timed_out
    created = [e["t"] for e in events if e["event"] == "Created" and "variant" in str(e.get("reason", "")).lower()]
    assert created == [0, 0, 360, 360, 780, 780], created  # its variants are made anew when each backoff ends


@pytest.mark.parametrize(("value", "message"), [
    ("soon", "spec.submit[0].podsReadyAfter: invalid duration 'soon'"),
    (True, "spec.submit[0].podsReadyAfter"),
])
def test_pods_ready_after_is_a_duration_or_never(tmp_path: Path, value: object, message: str) -> None:
    path = _scenario(tmp_path, [{"at": "0s", "podsReadyAfter": value, "object": job("a", queue="q", cpu="1").object()}])
    with pytest.raises((ScenarioError, InvalidObject), match=message.replace("[", r"\[").replace("]", r"\]")):
        load_scenario(path)


def test_a_scenarios_kueue_configuration_is_checked_with_its_lines(tmp_path: Path) -> None:
    path = _scenario(tmp_path, [], {**CONFIG, "fairSharing": {"preemptionStrategies": []}})
    with pytest.raises(InvalidObject) as caught:
        load_scenario(path)
    text = str(caught.value)
    assert "spec.kueueConfig.fairSharing.preemptionStrategies: Required value" in text and "line " in text
    (tmp_path / "kueue.yaml").write_text(yaml.safe_dump({**CONFIG, "waitForPodsReady": {"timeout": "later"}}))
    with pytest.raises(InvalidObject, match=r"kueue.yaml: document 1 \(Configuration\) is invalid\n  line \d+: "
                                            r"waitForPodsReady.timeout: invalid duration 'later'"):
        load_scenario(_scenario(tmp_path, [], "kueue.yaml"))
    with pytest.raises(ScenarioError, match=r"spec\.kueueConfig: .*missing\.yaml: no such file"):
        load_scenario(_scenario(tmp_path, [], "missing.yaml"))


def test_block_admission_holds_every_admission_until_the_admitted_pods_are_ready(tmp_path: Path) -> None:
    config = {**CONFIG, "waitForPodsReady": {"timeout": "5m", "blockAdmission": True,
                                             "requeuingStrategy": {"backoffBaseSeconds": 600}}}
    path = _scenario(tmp_path, [
        {"at": "0s", "runFor": "1h", "podsReadyAfter": "2m", "object": job("slow", queue="q", cpu="1").object()},
        {"at": "1m", "runFor": "1h", "podsReadyAfter": "never", "object": job("stuck", queue="q", cpu="1").object()},
        {"at": "1m", "runFor": "20m", "object": job("other", queue="q", cpu="1").object()}], config)
    assert [(t, kind, name) for t, kind, name, _r in _story(path)][:6] == [
        (0, "Admitted", "slow"),
        (120, "Admitted", "stuck"),  # held back until "slow" was ready (quota was free at 1 min)
        (420, "Evicted", "stuck"),  # it blocks everything until its time-out evicts it
        (420, "Admitted", "other"),
        (1020, "Requeued", "stuck"), (1020, "Admitted", "stuck")]
