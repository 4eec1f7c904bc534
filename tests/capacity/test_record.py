"""A workload's capacity record, transition by transition: each case applies its steps to a fresh record and compares
every field the transitions touch with what is written here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from flexq.capacity import CapacityState
from flexq.capacity.cluster import PodGroup
from flexq.capacity.record import Billing, Records, Request, WorkloadCapacity

GROUP = PodGroup("main", 1, {"cpu": 1000}, {}, ())
RATE = Billing(0.0, ((1.0, 3.6),))
"""USD 3.60 an hour: 0.001 a second."""


def _apply(record: WorkloadCapacity, step: tuple[str, float]) -> None:
    match step:
        case ("admitted", t):
            record.admitted(t)
        case ("waits", t):
            record.waits(t)
        case ("bound", t):
            record.bound(t, [GROUP], {"main": ["n1"]}, Billing(t, RATE.rates))
        case ("released", t):
            record.released(t)
        case ("charged", usd):
            record.charge(usd)
        case ("requested", _t):
            record.request = Request("dws", "w-dws-1", "pool")
        case _:
            raise AssertionError(f"unknown step {step}")


def _fields(record: WorkloadCapacity, now: float) -> dict[str, Any]:
    return {"state": record.state, "token": record.token, "waiting_since": record.waiting_since,
            "started_at": record.started_at, "placement": record.placement, "spent": record.spent,
            "waste": record.waste, "cost": round(record.cost(now), 6), "request": record.request}


@dataclass(frozen=True)
class Case:
    steps: tuple[tuple[str, float], ...]
    now: float
    expected: dict[str, Any]


IDLE = {"state": CapacityState.IDLE, "token": 0, "waiting_since": None, "started_at": None, "placement": None,
        "spent": None, "waste": 0.0, "cost": 0.0, "request": None}

CASES: dict[str, Case] = {
    "a record starts idle, having cost nothing": Case((), 0.0, IDLE),
    "admitted: its pods wait from then": Case(
        (("admitted", 5.0),), 5.0, {**IDLE, "state": CapacityState.WAITING, "waiting_since": 5.0}),
    "waiting again keeps when it began to wait (the provisioning timeout counts from there)": Case(
        (("admitted", 5.0), ("waits", 9.0)), 9.0, {**IDLE, "state": CapacityState.WAITING, "waiting_since": 5.0}),
    "bound: it runs, and its nodes' bill runs with it": Case(
        (("admitted", 5.0), ("bound", 10.0)), 110.0,
        {**IDLE, "state": CapacityState.RUNNING, "started_at": 10.0, "placement": {"main": ["n1"]}, "cost": 0.1}),
    "admitted again while running: it runs on": Case(
        (("bound", 10.0), ("admitted", 20.0)), 10.0,
        {**IDLE, "state": CapacityState.RUNNING, "started_at": 10.0, "placement": {"main": ["n1"]}}),
    "released: the run's cost is kept, its request dropped, its timers stale": Case(
        (("admitted", 0.0), ("requested", 0.0), ("bound", 10.0), ("released", 1010.0)), 5000.0,
        {**IDLE, "token": 1, "spent": 1.0, "cost": 1.0}),
    "released before it ran: it cost nothing, but it is counted": Case(
        (("admitted", 0.0), ("released", 30.0)), 30.0, {**IDLE, "token": 1, "spent": 0.0}),
    "a second run adds to the first": Case(
        (("bound", 0.0), ("released", 1000.0), ("admitted", 1000.0), ("bound", 2000.0)), 2500.0,
        {**IDLE, "state": CapacityState.RUNNING, "token": 1, "started_at": 2000.0, "placement": {"main": ["n1"]},
         "spent": 1.0, "cost": 1.5}),
    "a lost variant's capacity is paid and counted as waste": Case(
        (("charged", 2.5),), 0.0, {**IDLE, "spent": 2.5, "waste": 2.5, "cost": 2.5}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_transition_leaves_the_record_as_written(name: str) -> None:
    case = CASES[name]
    record = WorkloadCapacity("default/w")
    for step in case.steps:
        _apply(record, step)
    assert _fields(record, case.now) == case.expected
    assert set(case.expected) == set(IDLE), "a case names every field, no other"


def test_the_views_show_each_workload_by_its_record() -> None:
    records = Records()
    for step in (("admitted", 0.0), ("bound", 0.0)):
        _apply(records.of("default/a"), step)
    _apply(records.of("default/b"), ("admitted", 1.0))
    _apply(records.of("default/b"), ("requested", 1.0))
    _apply(records.of("default/c"), ("released", 2.0))
    assert set(records.running) == {"default/a"} and "default/b" not in records.running
    assert dict(records.placements) == {"default/a": {"main": ["n1"]}}
    assert dict(records.started_at) == {"default/a": 0.0}
    assert dict(records.requests) == {"default/b": Request("dws", "w-dws-1", "pool")}
    assert dict(records.costs) == {"default/c": 0.0}
    assert records.waiting() == ["default/b"], "a running workload does not wait"
    assert records.token("default/c") == 1 and records.token("default/unknown") == 0
    assert records.get("default/unknown") is None, "reading makes no record"
