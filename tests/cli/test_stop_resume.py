"""``flexq stop`` and ``flexq resume`` (kueuectl's ``kubectl kueue stop|resume``): a ClusterQueue's or LocalQueue's
``spec.stopPolicy`` (``HoldAndDrain``, or ``Hold`` with ``--keep-already-running``; ``None`` to resume) and a
Workload's ``spec.active``, each taking effect on the live server."""

from __future__ import annotations

from typing import Any

import yaml

from tests import admin
from tests.conftest import Server
from tests.queues import queue_yaml
from tests.support import condition, eventually, job

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def _get(server: Server, path: str) -> dict[str, Any]:
    got: dict[str, Any] = admin.get(f"{server.url}{KUEUE}{path}").json()
    return got


def _workload(server: Server) -> dict[str, Any]:
    return next(iter(_get(server, "/namespaces/default/workloads")["items"]))


def _state(server: Server) -> tuple[str | None, str | None, str]:
    """The workload's QuotaReserved and Evicted conditions' statuses, and the Evicted reason."""
    wl = _workload(server)
    evicted = next((c for c in wl["status"].get("conditions", []) if c["type"] == "Evicted"), {})
    return condition(wl, "QuotaReserved"), condition(wl, "Evicted"), str(evicted.get("reason", ""))


def _until(server: Server, wanted: tuple[str | None, str | None, str]) -> None:
    def check() -> tuple[str | None, str | None, str]:
        state = _state(server)
        assert state == wanted
        return state

    assert eventually(check) == wanted


def test_stop_and_resume_each_kind(flexq: Any, server: Server) -> None:
    assert flexq("apply", "-f", "-", input=queue_yaml(("default-flavor", None))).code == 0
    assert flexq("apply", "-f", "-", input=yaml.safe_dump(job("runs", queue="q", cpu="1").object())).code == 0
    _until(server, ("True", None, ""))

    stopped = flexq("stop", "clusterqueue", "cq")
    assert (stopped.code, stopped.out) == (0, "clusterqueue.kueue.x-k8s.io/cq\n")
    assert _get(server, "/clusterqueues/cq")["spec"]["stopPolicy"] == "HoldAndDrain"
    _until(server, ("False", "True", "ClusterQueueStopped"))
    assert flexq("resume", "cq", "cq").code == 0
    assert _get(server, "/clusterqueues/cq")["spec"]["stopPolicy"] == "None"
    _until(server, ("True", "False", "QuotaReserved"))

    held = flexq("stop", "localqueue", "q", "--keep-already-running")
    assert (held.code, held.out) == (0, "localqueue.kueue.x-k8s.io/q\n")
    assert _get(server, "/namespaces/default/localqueues/q")["spec"]["stopPolicy"] == "Hold"
    assert _state(server)[0] == "True", "Hold keeps what runs"
    assert flexq("resume", "localqueue", "q", "-n", "default").code == 0
    assert _get(server, "/namespaces/default/localqueues/q")["spec"]["stopPolicy"] == "None"

    name = _workload(server)["metadata"]["name"]
    wl_stopped = flexq("stop", "workload", "job/runs")
    assert (wl_stopped.code, wl_stopped.out) == (0, f"workload.kueue.x-k8s.io/{name} stopped\n")
    assert _workload(server)["spec"]["active"] is False
    _until(server, ("False", "True", "Deactivated"))
    resumed = flexq("resume", "workload", name)
    assert (resumed.code, resumed.out) == (0, f"workload.kueue.x-k8s.io/{name} resumed\n")
    assert _workload(server)["spec"]["active"] is True
    _until(server, ("True", "False", "QuotaReserved"))


def test_unknown_names_are_refused_without_a_traceback(flexq: Any) -> None:
    for args, what in ((("stop", "clusterqueue", "nope"), 'clusterqueues.kueue.x-k8s.io "nope" not found'),
                       (("resume", "localqueue", "nope", "-n", "team"), 'localqueues.kueue.x-k8s.io "nope" not found'),
                       (("stop", "workload", "nope"), 'workloads.kueue.x-k8s.io "nope" not found'),
                       (("stop", "clusterqueue", "nope", "--dry-run", "client"), '"nope" not found')):
        result = flexq(*args)
        assert result.code == 1 and what in result.err and "Traceback" not in result.err, (args, result)
