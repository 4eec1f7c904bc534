"""Every small configuration of a pod set group's placement, as Kueue's grouped-placement tests walk them
(pkg/cache/scheduler/tas_flavor_snapshot_grouped_placement_test.go): three domains of one level, each holding 0 to 3
slices, and either no room for the leader or room for it beside 0 to all of its slices; for every count of workers
that some placement can hold with the leader, the level's search must choose domains that still hold them with the
leader (:func:`~flexq.scheduler.tas_groups.fit_level`), and the minimum placement must give every worker and the one
leader within what each domain holds (:class:`~flexq.scheduler.tas_groups.Down`)."""

from __future__ import annotations

import itertools

import pytest

from flexq.scheduler.domains import HOSTNAME, Goal, Stats
from flexq.scheduler.tas_balanced import Domain
from flexq.scheduler.tas_groups import Down, fit_level

State = tuple[int, int, bool]
"""A domain's slices, its slices beside the leader, and whether the leader fits there."""

STATES: list[State] = [(n, 0, False) for n in range(4)] + [(n, w, True) for n in range(4) for w in range(n + 1)]
CONFIGURATIONS = list(itertools.product(STATES, repeat=3))


def _feasible(config: tuple[State, ...], needed: int) -> bool:
    """Some domain holds the leader with room left for ``needed`` slices over all of them."""
    total = sum(n for n, _, _ in config)
    return any(fits and total - (n - w) >= needed for n, w, fits in config)


def _domains(config: tuple[State, ...], size: int) -> list[Domain]:
    return [Domain((f"domain-{i}",), pods=n * size, slices=n, leaders=int(fits), pods_with=w * size, slices_with=w)
            for i, (n, w, fits) in enumerate(config)]


def _counts() -> list[tuple[tuple[State, ...], int]]:
    return [(config, needed) for config in CONFIGURATIONS for needed in range(sum(n for n, _, _ in config) + 1)
            if _feasible(config, needed)]


FEASIBLE = _counts()


@pytest.mark.parametrize("loose", [False, True], ids=["best fit", "unconstrained"])
def test_the_level_search_keeps_every_feasible_group_placement(loose: bool) -> None:
    failures = []
    for config, needed in FEASIBLE:
        goal = Goal(needed, 1, False, loose, "default", (HOSTNAME,))
        found = fit_level([_domains(config, 1)], 0, goal, Stats())
        if isinstance(found, str) or found[0] != 0:
            failures.append((config, needed, found))
            continue
        chosen = found[1]
        total = sum(d.slices for d in chosen)
        if not any(d.leaders > 0 and total - (d.slices - d.slices_with) >= needed for d in chosen):
            failures.append((config, needed, [d.values for d in chosen]))
    assert not failures, f"{len(failures)} of {len(FEASIBLE)}, first: {failures[:3]}"


@pytest.mark.parametrize(("loose", "size"), [(False, 1), (True, 1), (False, 2), (True, 2)],
                         ids=["best fit", "unconstrained", "best fit, slices of 2", "unconstrained, slices of 2"])
def test_the_minimum_placement_gives_every_worker_and_one_leader(loose: bool, size: int) -> None:
    failures = []
    for config, needed in FEASIBLE:
        domains = _domains(config, size)
        before = {d.values: (d.pods, d.pods_with, d.leaders) for d in domains}
        result = Down(loose).to_minimum(domains, needed * size, 1, size, size > 1)
        problems = []
        if len({d.values for d in result}) != len(result):
            problems.append("a domain returned twice")
        for d in result:
            pods, with_leader, fits = before[d.values]
            if d.pods < 0 or d.leaders < 0:
                problems.append(f"{d.values}: negative")
            if d.pods > pods or (d.leaders > 0 and (d.pods > with_leader or not fits)):
                problems.append(f"{d.values}: {d.pods} pods, {d.leaders} leader, beyond {before[d.values]}")
            if d.pods % size:
                problems.append(f"{d.values}: {d.pods} pods, not whole slices")
        if sum(d.pods for d in result) != needed * size or sum(d.leaders for d in result) != 1:
            problems.append(f"placed {[(d.values, d.pods, d.leaders) for d in result]}")
        if problems:
            failures.append((config, needed, problems))
    assert not failures, f"{len(failures)} of {len(FEASIBLE)}, first: {failures[:3]}"
