"""Kueue's maximum execution time on the live server: a Job labelled ``kueue.x-k8s.io/max-exec-time-seconds`` gets
a Workload with ``spec.maximumExecutionTimeSeconds``, and once admitted that long it is deactivated
(``spec.active: false``, Evicted ``DeactivatedDueToMaximumExecutionTimeExceeded``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from tests import admin
from tests.conftest import Server, start_server, stop_server
from tests.queues import queue_yaml
from tests.support import condition, eventually, job


def _workload(server: Server) -> dict[str, Any]:
    items = admin.get(f"{server.url}/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads").json()["items"]
    return next(iter(items))


def test_a_job_admitted_past_its_maximum_execution_time_is_deactivated(flexq: Any, server: Server) -> None:
    limited: dict[str, Any] = job("limited", queue="q", cpu="1").object()
    limited["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "2"
    assert flexq("apply", "-f", "-", input=queue_yaml(("default-flavor", None))).code == 0
    assert flexq("apply", "-f", "-", input=yaml.safe_dump(limited)).code == 0

    def admitted() -> dict[str, Any]:
        wl = _workload(server)
        assert condition(wl, "Admitted") == "True"
        return wl

    assert eventually(admitted)["spec"]["maximumExecutionTimeSeconds"] == 2

    def deactivated() -> tuple[bool, str, str]:
        wl = _workload(server)
        evicted = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
        assert wl["spec"]["active"] is False and evicted["status"] == "True"
        return wl["spec"]["active"], evicted["reason"], evicted["message"]

    assert eventually(deactivated, timeout=30) == (
        False, "DeactivatedDueToMaximumExecutionTimeExceeded",
        "The workload is deactivated due to exceeding the maximum execution time")
    assert condition(_workload(server), "Admitted") == "False"


def test_the_maximum_execution_time_runs_on_across_a_restart(tmp_path: Path) -> None:
    """A server stopped while a limited job runs: the one started on the same state deactivates it when its time is
    up, counted from its admission before the restart (not from the restart, and not never)."""
    limited: dict[str, Any] = job("limited", queue="q", cpu="1").object()
    limited["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "6"
    home = tmp_path / "home"
    first = start_server(home)
    try:
        assert first.cli("apply", "-f", "-", input=queue_yaml(("default-flavor", None))).code == 0
        assert first.cli("apply", "-f", "-", input=yaml.safe_dump(limited)).code == 0
        def admitted() -> None:
            assert condition(_workload(first), "Admitted") == "True"

        eventually(admitted)
        since = time.monotonic()
    finally:
        stop_server(first)
    second = start_server(home)
    try:
        def deactivated() -> str:
            wl = _workload(second)
            assert wl["spec"]["active"] is False
            return str(next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")["reason"])

        assert eventually(deactivated, timeout=30) == "DeactivatedDueToMaximumExecutionTimeExceeded"
        assert time.monotonic() - since < 20, "deactivated when its six seconds were up, not much later"
    finally:
        stop_server(second)
