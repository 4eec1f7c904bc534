"""The live server foresees: every waiting workload's status carries its forecast, kept current as jobs come and go."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests import admin
from tests.conftest import Server, guide_text, start_server, stop_server
from tests.queues import queue_yaml
from tests.support import condition, eventually, guide_setup, job, serve_capacity, workloads

WL = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"

QUEUE = queue_yaml(("default", None), cpu=4)


def _job(name: str, pods: int, run: str | None, each: str = "1") -> str:
    """A Job of ``pods`` pods of ``each`` cpu on LocalQueue ``q``, with its declared run time where one is given."""
    made = job(name, queue="q", cpu=each, pods=pods).namespace(None).image("x")
    return (made.annotate("flexq.dev/expected-run-time", run) if run else made).yaml()


def _by_job(server: Server) -> dict[str, dict[str, Any]]:
    items = admin.get(server.url + WL).json()["items"]
    return {w["metadata"]["ownerReferences"][0]["name"]: w for w in items}


def _at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _condition(wl: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in wl["status"]["conditions"] if c["type"] == type_)


def test_waiting_jobs_carry_a_forecast_that_follows_the_queue(flexq: Any, server: Server) -> None:
    assert flexq("apply", "-f", "-", input=QUEUE).code == 0
    assert flexq("apply", "-f", "-", input=_job("big", 4, "1h")).code == 0
    assert flexq("apply", "-f", "-", input=_job("small", 2, "30m") + "---\n" + _job("tiny", 1, None)).code == 0

    def foreseen() -> dict[str, dict[str, Any]]:
        wls = _by_job(server)
        assert set(wls) == {"big", "small", "tiny"}
        assert "forecast" in wls["small"]["status"] and "forecast" in wls["tiny"]["status"]
        return wls

    wls = eventually(foreseen, timeout=30)
    admitted = _at(_condition(wls["big"], "Admitted")["lastTransitionTime"])
    assert "forecast" not in wls["big"]["status"], "a running job has no forecast"
    for name in ("small", "tiny"):
        forecast = wls[name]["status"]["forecast"]
        assert abs(_at(forecast["start"]) - (admitted + 3600)) <= 2, "both start when big's hour is up"
        assert forecast["basis"] == "Declared", "they wait on big, whose run time is declared"
        assert forecast["flavors"] == ["default"]
        assert "quota frees when Job default/big ends" in forecast["message"]
        condition = _condition(wls[name], "Forecast")
        assert condition["status"] == "True" and condition["reason"] == "Declared"

    table = flexq("get", "workloads")
    assert table.code == 0 and "ETA" in table.out.splitlines()[0]
    rows = {line.split()[0]: line for line in table.out.splitlines()[1:]}
    small = next(row for name, row in rows.items() if "small" in name)
    assert " 59m" in small or " 60m" in small, table.out

    described = flexq("describe", "workload", wls["small"]["metadata"]["name"])
    assert described.code == 0 and "quota frees when Job default/big ends" in described.out

    rows = {r["jobName"]: r for r in admin.get(server.url + "/flexq/v1/dashboard/jobs").json()["items"]}
    assert rows["small"]["eta"] == wls["small"]["status"]["forecast"]["start"]
    assert "quota frees when Job default/big ends" in rows["small"]["forecast"]
    assert rows["small"]["forecastBasis"] == "Declared" and rows["big"]["forecast"] == ""

    (queue,) = admin.get(server.url + "/flexq/v1/dashboard/overview").json()["queues"]
    assert 3500 < queue["nextStartSeconds"] <= queue["allStartedSeconds"] <= 3600

    listed = flexq("forecast")
    assert listed.code == 0, listed.err
    lines = listed.out.splitlines()
    assert lines[0].split()[:3] == ["JOB", "QUEUE", "START"] and len(lines) == 3
    assert "job/small" in listed.out and "job/tiny" in listed.out and "job/big" not in listed.out

    what_if = flexq("forecast", "-f", "-", input=_job("maybe", 1, "10m"))
    assert what_if.code == 0, what_if.err
    assert "job/maybe" in what_if.out and "(nothing was submitted)" in what_if.out
    assert "quota frees when Job default/big ends" in what_if.out
    as_json = flexq("forecast", "-f", "-", "-o", "json", input=_job("maybe", 1, "10m"))
    (item,) = json.loads(as_json.out)
    assert abs(item["start"] - (admitted + 3600)) <= 2 and item["basis"] == "Declared"
    assert item["byFlavor"] == [], "one flavor: nothing to hold it to"
    assert set(_by_job(server)) == {"big", "small", "tiny"}, "a what-if submits nothing"
    not_a_job = flexq("forecast", "-f", "-", input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert not_a_job.code == 1 and "ConfigMap is not a job" in not_a_job.err
    assert "Traceback" not in not_a_job.err

    metrics = admin.get(server.url + "/metrics").text
    waits = {line.split("quantile=")[1].split('"')[1]: float(line.split()[-1]) for line in metrics.splitlines()
             if line.startswith('flexq_pending_workloads_estimated_wait_seconds{cluster_queue="cq"')}
    assert set(waits) == {"0.5", "0.9", "1"} and 3500 < waits["1"] <= 3600, metrics
    made = next(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("flexq_forecasts_total"))
    assert made >= 1

    assert flexq("delete", "job", "big").code == 0

    def moved() -> None:
        now = _by_job(server)
        assert _condition(now["small"], "Admitted")["status"] == "True"
        assert "forecast" not in now["small"]["status"], "it started: its forecast is gone"
        assert not any(c["type"] == "Forecast" for c in now["small"]["status"]["conditions"])

    eventually(moved, timeout=30)


POOL_QUEUE = queue_yaml(("cpu", "cpu-pool"), cpu=100, memory="1Ti")

CAPACITY = """
pools:
  - {name: cpu-pool, machineType: n2-standard-16, minNodes: 0, maxNodes: 1}
cloud:
  cpu-pool: {bootTime: 20s}
"""


def test_simulate_from_server_runs_the_live_state_under_more_nodes(tmp_path: Path) -> None:
    path = tmp_path / "capacity.yaml"
    path.write_text(CAPACITY)
    server = start_server(tmp_path / "home", "--capacity", str(path))
    try:
        assert server.cli("apply", "-f", "-", input=POOL_QUEUE).code == 0
        assert server.cli("apply", "-f", "-", input=_job("first", 1, "1h", each="12")).code == 0
        assert server.cli("apply", "-f", "-", input=_job("second", 1, "1h", each="12")).code == 0
        def simulated() -> dict[str, Any]:
            result = server.cli("simulate", "--from-server", "--max-nodes", "cpu-pool=2", "-o", "json")
            assert result.code == 0, result.err
            (item,) = [i for i in json.loads(result.out) if "second" in i["workload"]]
            assert item["now"]["start"] is not None
            return item

        item = eventually(simulated, timeout=30)
        now, changed = item["now"]["start"], item["changed"]["start"]
        assert now - time.time() > 3500, "one node: it starts when the first job's hour is up"
        assert changed - time.time() < 60, "two nodes: it starts once its own node has booted"
        table = server.cli("simulate", "--from-server", "--max-nodes", "cpu-pool=2")
        assert table.code == 0 and "SOONER BY" in table.out and "second" in table.out
        wrong = server.cli("simulate", "--from-server", "--max-nodes", "gpu-pool=2")
        assert wrong.code == 1 and "no node pool gpu-pool (there are: cpu-pool)" in wrong.err
        assert "Traceback" not in wrong.err
    finally:
        stop_server(server)


TWO_PLANS = """
pools:
  - {name: a-pool, machineType: n2-standard-16, minNodes: 0, maxNodes: 1}
  - {name: b-pool, machineType: n2-standard-16, minNodes: 0, maxNodes: 1}
cloud:
  a-pool: {bootTime: 1s}
  b-pool: {bootTime: 10m}
"""


def test_what_if_under_each_flavor_on_a_live_server(tmp_path: Path) -> None:
    """Plan A is held for an hour; Plan B's node takes ten minutes to boot: held to each, a new job would start in an
    hour or in ten minutes, and the CLI shows both."""
    path = tmp_path / "capacity.yaml"
    path.write_text(TWO_PLANS)
    server = start_server(tmp_path / "home", "--capacity", str(path))
    try:
        queues = queue_yaml(("plan-a", "a-pool"), ("plan-b", "b-pool"), cpu=12, memory="1Ti")
        assert server.cli("apply", "-f", "-", input=queues).code == 0
        assert server.cli("apply", "-f", "-", input=_job("first", 1, "1h", each="12")).code == 0
        def reserved() -> None:
            assert _condition(_by_job(server)["first"], "QuotaReserved")["status"] == "True"

        eventually(reserved, timeout=30)

        def held() -> list[dict[str, Any]]:
            result = server.cli("forecast", "-f", "-", "-o", "json", input=_job("maybe", 1, "10m", each="12"))
            assert result.code == 0, result.err
            (item,) = json.loads(result.out)
            rows: list[dict[str, Any]] = item["byFlavor"]
            assert [r["flavor"] for r in rows] == ["plan-a", "plan-b"], item
            assert all(r["start"] is not None for r in rows), rows
            return rows

        plan_a, plan_b = eventually(held, timeout=30)
        now = time.time()
        assert plan_a["start"] - now > 3000, "held to Plan A: when the first job's hour is up"
        assert plan_b["start"] - now < 1200, "held to Plan B: once its node has booted"
        assert "plan-b" in plan_b["flavors"] and plan_a["basis"] == "Declared"
        table = server.cli("forecast", "-f", "-", input=_job("maybe", 1, "10m", each="12"))
        assert table.code == 0 and "Under each flavor" in table.out, table.out
        assert not [name for name in _by_job(server) if "maybe" in name], "a what-if submits nothing"
    finally:
        stop_server(server)


KUEUE_DWS = """cloud:
  dws-pool: {queuedDelay: 1h}
fallback: false
"""


RACING_DWS = "cloud:\n  on-demand-pool: {available: 4, bootTime: 1s}\n  dws-pool: {queuedDelay: 1h}\n"


@pytest.mark.parametrize("racing", [False, True], ids=["kueue-policy", "racing"])
def test_a_job_waiting_for_dws_carries_its_forecast(tmp_path: Path, racing: bool) -> None:
    """A job waits for its ProvisioningRequest, answered in an hour; its status carries when it will start until it
    does. Kueue's policy (no racing): Plan A has no quota left, so the guide's job reserves Plan B's and waits. The
    guide's default (racing): job 1 takes Plan A; job 2 races, its Plan A variant waiting for quota, its Plan B variant
    holding quota and waiting; job 2's own Workload, which shows its variants, carries the forecast."""
    servers = serve_capacity(tmp_path, RACING_DWS if racing else KUEUE_DWS)
    server = next(servers)
    try:
        if racing:
            guide_setup(server, guide_text("dws-tpu-queue.yaml"), jobs=("1", "2"))
        else:
            plan_a_taken = guide_text("dws-tpu-queue.yaml").replace("nominalQuota: 16", "nominalQuota: 0")
            guide_setup(server, plan_a_taken, jobs=("1",))
        name = "rayjob-tpu-v6e-dws-2" if racing else "rayjob-tpu-v6e-dws-1"

        def waiting() -> dict[str, Any]:
            wl = workloads(server)[name]
            if racing:
                assert wl["status"].get("variants"), "it races"
            else:
                assert condition(wl, "QuotaReserved") == "True" and condition(wl, "Admitted") == "False"
                assert "dws" in {f for ps in wl["status"]["admission"]["podSetAssignments"]
                                 for f in ps["flavors"].values()}
            assert "forecast" in wl["status"], wl["status"]
            return wl

        wl = eventually(waiting, timeout=60)
        start = _at(wl["status"]["forecast"]["start"])
        assert 3300 < start - time.time() <= 3600 + 60, "when DWS answers and the slice's nodes are up"
        assert "ProvisioningRequest" in _condition(wl, "Forecast")["message"]
        table = admin.get(server.url + WL, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
        eta = [c["name"] for c in table["columnDefinitions"]].index("ETA")
        (row,) = [r for r in table["rows"] if r["object"]["metadata"]["name"] == wl["metadata"]["name"]]
        assert row["cells"][eta] not in ("", None), "kubectl get workloads shows it"
    finally:
        servers.close()
