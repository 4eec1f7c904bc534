"""An elastic RayJob's workload in the live server (jobs not executed): growth as a slice, shrinking in place."""

from __future__ import annotations

from typing import Any

from tests import admin
from tests.conftest import ROOT, Server
from tests.support import eventually

EXAMPLE = ROOT / "examples" / "elastic"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"


REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"


def _workloads(srv: Server) -> list[dict[str, Any]]:
    """Oldest first: a replacement slice after the slice it replaces (timestamps have whole seconds only)."""
    items = admin.get(srv.url + WORKLOADS).json()["items"]
    return sorted(items, key=lambda w: (REPLACES in (w["metadata"].get("annotations") or {}),
                                        w["metadata"]["creationTimestamp"]))


def _cpu(srv: Server) -> str:
    cq = admin.get(srv.url + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cpu-queue").json()
    usage = cq["status"]["flavorsUsage"][0]["resources"]
    return str(next(r["total"] for r in usage if r["name"] == "cpu"))


def _replicas(srv: Server, n: int) -> None:
    patch = [{"op": "replace", "path": "/spec/rayClusterSpec/workerGroupSpecs/0/replicas", "value": n}]
    response = admin.patch(f"{srv.url}/apis/ray.io/v1/namespaces/default/rayjobs/elastic", json=patch,
                           headers={"Content-Type": "application/json-patch+json"})
    assert response.status_code == 200, response.text


def test_an_elastic_job_grows_by_a_slice_and_shrinks_in_place(flexq: Any, server: Server) -> None:
    assert flexq("apply", "-f", str(EXAMPLE / "queue.yaml")).code == 0
    assert flexq("apply", "-f", str(EXAMPLE / "rayjob-elastic.yaml")).code == 0
    eventually(lambda: _check(_cpu(server) == "1500m"))
    _replicas(server, 3)

    def grown() -> None:
        old, new = _workloads(server)
        assert [c["reason"] for c in old["status"]["conditions"] if c["type"] == "Finished"] == \
            ["WorkloadSliceReplaced"]
        assert new["metadata"]["annotations"][REPLACES].endswith(
            old["metadata"]["name"])
        assert [p["count"] for p in new["status"]["admission"]["podSetAssignments"]] == [1, 3]
        assert _cpu(server) == "3500m"

    eventually(grown)
    # As Kueue tells it: the old slice's replacement on the old slice, no FinishedWorkload on the job (its workload
    # is the new slice, which goes on).
    events = admin.get(server.url + "/api/v1/namespaces/default/events").json()["items"]
    old, _new = _workloads(server)
    on_old = {e["reason"]: e["message"] for e in events if e["involvedObject"]["name"] == old["metadata"]["name"]}
    assert "WorkloadSliceReplaced" in on_old and "Finished" not in on_old, on_old
    assert "workload slice aggregation" in on_old["WorkloadSliceReplaced"]
    assert not [e for e in events if e["reason"] == "FinishedWorkload"], "the job goes on"
    _replicas(server, 1)

    def shrunk() -> None:
        workloads = _workloads(server)
        assert len(workloads) == 2, "shrinking makes no new slice"
        assert [p["count"] for p in workloads[1]["spec"]["podSets"]] == [1, 1]
        assert [p["count"] for p in workloads[1]["status"]["admission"]["podSetAssignments"]] == [1, 1]
        assert _cpu(server) == "1500m"

    eventually(shrunk)


def test_a_slice_evicted_while_its_growth_waits_hands_the_job_to_the_growth(flexq: Any, server: Server) -> None:
    assert flexq("apply", "-f", str(EXAMPLE / "queue.yaml")).code == 0
    assert flexq("apply", "-f", str(EXAMPLE / "rayjob-elastic.yaml")).code == 0
    eventually(lambda: _check(_cpu(server) == "1500m"))
    _replicas(server, 5)  # 5.5 CPUs: more than the queue's 4, the growth waits

    def waiting() -> None:
        _old, new = _workloads(server)
        assert [c["status"] for c in new["status"]["conditions"] if c["type"] == "QuotaReserved"] == ["False"]
        assert _cpu(server) == "1500m"

    eventually(waiting)
    old = _workloads(server)[0]["metadata"]["name"]
    response = admin.patch(f"{server.url}{WORKLOADS}/{old}", json={"spec": {"active": False}},
                           headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200, response.text
    _replicas(server, 3)  # the growth, not admitted yet, is resized in place

    def handed_over() -> None:
        old, new = _workloads(server)
        finished = [c for c in old["status"]["conditions"] if c["type"] == "Finished"]
        assert [(c["status"], c["reason"]) for c in finished] == [("True", "WorkloadSliceReplaced")]
        assert "QuotaReserved" not in [c["type"] for c in old["status"]["conditions"] if c["status"] == "True"]
        assert [p["count"] for p in new["status"]["admission"]["podSetAssignments"]] == [1, 3]
        assert _cpu(server) == "3500m", "the growth holds quota for all its pods, the old slice none"

    eventually(handed_over)


def _check(ok: bool) -> None:
    assert ok
