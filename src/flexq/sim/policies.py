"""One scenario under several policies, side by side.

- ``kueue-compatible``: Kueue's behaviour: a job falls back to the next flavor only when quota is used
  up; a flavor whose nodes cannot be had keeps its jobs waiting there; a pool at its maximum fails its
  ProvisioningRequests;
- ``flexq``: every job races its flavors (:mod:`flexq.scheduler.race`) and runs on the first that can start
  it; a pool at its maximum is a wait;
- ``oracle``: the clairvoyant greedy schedule of :mod:`flexq.sim.oracle`, a reference (not a bound);
- ``lower-bound``: the clairvoyant bound of :mod:`flexq.sim.bound`: no policy can start a job earlier.

Without modelled capacity the first two behave alike, and only ``flexq`` is run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flexq.sim.bound import bound_rows, lower_bound
from flexq.sim.oracle import oracle
from flexq.sim.runner import SimResult, run_scenario
from flexq.sim.scenario import Scenario

__all__ = ["FLEXQ", "KUEUE", "LOWER_BOUND", "ORACLE", "PolicyRun", "compare_policies", "policy_name", "policy_run"]

KUEUE, FLEXQ, ORACLE, LOWER_BOUND = "kueue-compatible", "flexq", "oracle", "lower-bound"


@dataclass
class PolicyRun:
    """What the report needs of one policy's run."""

    rows: list[dict[str, Any]]
    events: list[dict[str, Any]]
    end: float
    nodes: list[tuple[float, dict[str, tuple[int, int]]]] = field(default_factory=list)


def policy_run(result: SimResult) -> PolicyRun:
    return PolicyRun(result.summary()["workloads"], result.events, result.end, result.nodes)


def policy_name(scenario: Scenario) -> str:
    """The policy a scenario runs under as written: Kueue-compatible when it turns fallback off."""
    return KUEUE if scenario.capacity is not None and not scenario.capacity.fallback else FLEXQ


def compare_policies(scenario: Scenario, result: SimResult | None = None,
                     progress: Callable[[str, float], None] | None = None) -> dict[str, PolicyRun]:
    """Run ``scenario`` under each policy (``result``: its run as written, if already done)."""
    def run(s: Scenario, label: str) -> SimResult:
        return run_scenario(s, (lambda t: progress(label, t)) if progress is not None else None)

    runs: dict[str, SimResult] = {}
    first = result if result is not None else run(scenario, policy_name(scenario))
    runs[policy_name(scenario)] = first
    if scenario.capacity is not None:
        other = dataclasses.replace(scenario, capacity=dataclasses.replace(
            scenario.capacity, fallback=not scenario.capacity.fallback))
        runs[policy_name(other)] = run(other, policy_name(other))
    out = {name: policy_run(runs[name]) for name in (KUEUE, FLEXQ) if name in runs}
    assert first.config is not None
    horizon = scenario.until if scenario.until is not None else _horizon(first)
    rows = out[FLEXQ if FLEXQ in out else KUEUE].rows
    if scenario.capacity is not None:
        planned = oracle(first.config, scenario.capacity, first.workloads, first.submitted, first.run_for, horizon)
        out[ORACLE] = PolicyRun(bound_rows(rows, planned, first.run_for), [], first.end)
    earliest = lower_bound(first.config, scenario.capacity, first.workloads, first.submitted, horizon)
    out[LOWER_BOUND] = PolicyRun(bound_rows(rows, earliest, first.run_for), [], first.end)
    return out


def _horizon(result: SimResult) -> float:
    """Without ``until``: far enough that a week-long DWS wait after the last arrival still counts."""
    last = max(result.submitted.values(), default=0.0)
    return max(result.end, last) + 8 * 24 * 3600.0
