"""Topology-aware placement of a pod set group: Kueue's ``podSetGroupName``, two pod sets of one workload placed
together, the leader's single pod in the domains its workers take (a LeaderWorkerSet's leader, a RayJob's head).

The placement is :mod:`flexq.scheduler.domains`' (Kueue's ``findTopologyAssignment``, BestFit profile) for the
workers' request, with the leader counted along (Kueue's leader-aware path of the same function):

- a leaf holds the leader where one leader pod fits its free capacity; its workers "with the leader" are then what
  fits of them beside it; a domain above holds the leader where a child does, and its workers with the leader are
  its workers less the smallest cost of the leader among the children that can hold it;
- at the requested level the domains that can hold the leader come first, then most slices with the leader, fewest
  pods with the leader, by values; the first that holds the leader and every slice beside it, by best fit, takes
  all; else a ``required`` request fails (Kueue's message counts the workers alone), a ``preferred`` one tries the
  level above, and at the top spreads: the leader's domain first, then the others by free slices;
- going down, each chosen domain's pods and its leader go to its children the same way, a child that can hold the
  leader without leaving too few for the workers taking it first.

With ``TASBalancedPlacement`` a ``preferred`` request is first placed as :mod:`flexq.scheduler.tas_balanced` does it,
the leader with its workers; BestFit as above where that finds nothing.

The leader's pod is placed where it fits by its own requests; which nodes may take the pods (taints, selectors) is
the workers'. Nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

# The tree, its free capacity and Kueue's messages are domains' own: this module is its leader-aware path, kept
# apart so that the placement of a pod set alone stays as it is, on the parts domains offers for it.
from flexq.scheduler.domains import (
    Domain,
    Goal,
    Stats,
    TopologyView,
    assignment_of,
    by_node,
    count_in,
    domain_tree,
    domains_by_level,
    no_domains,
    request_levels,
    subtract_held,
)
from flexq.scheduler.model import FlavorSpec, PodSet, Toleration, TopologyAssignment, TopologyRequest
from flexq.scheduler.tas_balanced import balanced_domains

__all__ = ["Down", "fit_level", "group_pairs", "leader_and_workers", "place_group", "place_pair"]


def group_pairs(podsets: Sequence[PodSet], flavor_of: Callable[[int], str | None]) -> dict[int, int]:
    """The pod sets placed as a group, each index to its partner's: two pod sets that name the same group in their
    topology requests and took the same topology-aware flavor (``flavor_of``: by index, None where none; the flavor
    assigner gives a group one flavor, so only a pod set of it that took none is left out). A group
    name borne by one pod set only, or by more than two (which the webhook refuses), groups nothing."""
    named: dict[str, list[int]] = {}
    for i, podset in enumerate(podsets):
        if podset.topology is not None and podset.topology.group and flavor_of(i) is not None:
            named.setdefault(podset.topology.group, []).append(i)
    pairs: dict[int, int] = {}
    for first, *rest in named.values():
        if len(rest) == 1 and flavor_of(first) == flavor_of(rest[0]):
            pairs[first], pairs[rest[0]] = rest[0], first
    return pairs


def leader_and_workers(first: PodSet, second: PodSet) -> tuple[PodSet, PodSet]:
    """Kueue's ``findLeaderAndWorkers``: the leader is the later pod set of the group unless it has more pods."""
    return (first, second) if second.count > first.count else (second, first)


def place_pair(view: TopologyView, flavor: FlavorSpec, first: PodSet, second: PodSet,
               empty: bool = False) -> tuple[TopologyAssignment, TopologyAssignment] | str:
    """A pod set group's two pod sets placed together, in their order, as its workers' request asks (Kueue places
    them only together); or why they cannot be. ``empty``: as :func:`place_group`'s."""
    leader, workers = leader_and_workers(first, second)
    assert workers.topology is not None
    placed = place_group(view, flavor, workers, leader, workers.topology, (*workers.tolerations, *flavor.tolerations),
                         empty)
    if isinstance(placed, str):
        return placed
    return placed if leader is first else (placed[1], placed[0])


def place_group(view: TopologyView, flavor: FlavorSpec, workers: PodSet, leader: PodSet, request: TopologyRequest,
                tolerations: Sequence[Toleration],
                empty: bool = False) -> tuple[TopologyAssignment, TopologyAssignment] | str:
    """Where the leader's pod and the workers' pods go (leader's, workers'), or why they cannot (Kueue's message,
    which counts the workers' pods); ``request`` is the workers'; ``empty``: as
    :func:`~flexq.scheduler.domains.place`'s."""
    levels = flavor.levels
    stats = Stats()
    roots, leaves = domain_tree(view, flavor, workers, tolerations, stats)
    if not empty:
        subtract_held(view, flavor, leaves)
    read = request_levels(request, levels)
    if isinstance(read, str):
        return read
    size, lowest, slice_idx, level_idx, loose = read
    _fill_leaves(leaves.values(), _per_pod(workers), _per_pod(leader), stats)
    if not by_node(levels):
        stats.total = len(leaves)
    for root in roots:
        _fill(root, size, slice_idx, 0)
    goal = Goal(workers.count, size, request.required, loose, flavor.topology, levels)
    by_level = domains_by_level(roots, len(levels))
    down = Down(loose)
    balanced = balanced_domains(by_level, level_idx, slice_idx, workers.count, size, leaders=1) \
        if view.balanced and not request.required and not loose else None
    if balanced is not None:
        idx, domains = balanced
        domains = down.to_minimum(domains, workers.count, 1, size, True)
    else:
        chosen = fit_level(by_level, level_idx, goal, stats)
        if isinstance(chosen, str):
            return chosen
        idx, domains = chosen
        domains = down.to_minimum(domains, workers.count, 1, size, True)
        while idx < min(lowest, slice_idx):
            domains = down.to_minimum(_sorted([c for d in domains for c in d.children], loose), workers.count, 1,
                                      size, True)
            idx += 1
    while idx < lowest:
        domains = [c for d in domains
                   for c in down.to_minimum(_sorted(d.children, loose), d.pods, d.leaders, 1, False)]
        idx += 1
    start = lowest if by_node(levels) else 0
    held = sorted((d.values[start:], d.leaders) for d in domains if d.leaders > 0)
    return TopologyAssignment(levels[start:], tuple(held)), assignment_of(levels, domains)


def _per_pod(podset: PodSet) -> dict[str, int]:
    per_pod = {r: v for r, v in podset.requests.items() if v > 0}
    per_pod["pods"] = 1000
    return per_pod


def _fill_leaves(leaves: Iterable[Domain], workers: Mapping[str, int],
                 leader: Mapping[str, int], stats: Stats) -> None:
    """Kueue's ``fillLeafCounts`` with a leader: the workers that fit, then, with the leader's pod there if it
    fits, the workers that fit beside it."""
    for leaf in leaves:
        leaf.pods = count_in(workers, leaf.free, stats)
        free = dict(leaf.free)
        if count_in(leader, free, Stats()) > 0:
            leaf.leaders = 1
            free = {r: free.get(r, 0) - leader.get(r, 0) for r in {*free, *leader}}
        leaf.pods_with = count_in(workers, free, Stats())


def _fill(domain: Domain, size: int, slice_idx: int, level: int) -> None:
    """Kueue's ``fillInCountsHelper`` with a leader required."""
    if domain.children:
        for child in domain.children:
            _fill(child, size, slice_idx, level + 1)
        domain.pods = sum(c.pods for c in domain.children)
        domain.slices = sum(c.slices for c in domain.children)
        holders = [c for c in domain.children if c.leaders > 0]
        domain.leaders = 1 if holders else 0
        domain.pods_with = domain.pods - min(c.pods - c.pods_with for c in holders) if holders else 0
        domain.slices_with = domain.slices - min(c.slices - c.slices_with for c in holders) \
            if holders else 0
    if level == slice_idx:
        domain.slices = domain.pods // size
        domain.slices_with = domain.pods_with // size


def _sorted(domains: Sequence[Domain], loose: bool) -> list[Domain]:
    """Kueue's ``sortedDomains`` (BestFit: most slices first; unconstrained: fewest), then fewest pods, values."""
    sign = 1 if loose else -1
    return sorted(domains, key=lambda d: (sign * d.slices, d.pods, d.values))


def _sorted_with_leader(domains: Sequence[Domain], loose: bool) -> list[Domain]:
    """Kueue's ``sortedDomainsWithLeader``: those that can hold the leader first, then by what fits beside it."""
    sign = 1 if loose else -1
    return sorted(domains, key=lambda d: (-d.leaders, sign * d.slices_with,
                                          d.pods_with, d.values))


def _best_fit(domains: Sequence[Domain], needed: int, count: Callable[[Domain], int],
              leaders: int) -> Domain:
    """Kueue's ``findBestFitDomainBy``: among those holding ``leaders``, the first holding ``needed`` with the
    least to spare (the first domain where none holds it)."""
    best, best_count = domains[0], None
    for domain in domains:
        if domain.leaders < leaders:
            continue
        have = count(domain)
        if have >= needed and (best_count is None or have < best_count):
            best, best_count = domain, have
    return best


def fit_level(by_level: list[list[Domain]], idx: int, goal: Goal,
               stats: Stats) -> tuple[int, list[Domain]] | str:
    """Kueue's ``findLevelWithFitDomains`` with one leader."""
    if not by_level[idx]:
        return no_domains(goal, idx, stats)
    ordered = _sorted_with_leader(by_level[idx], goal.loose)
    needed = goal.needed

    def with_leader(d: Domain) -> int:
        return d.slices_with

    if goal.loose:
        for domain in ordered:
            if domain.leaders >= 1 and with_leader(domain) >= needed:
                return idx, [domain]
    top = ordered[0]
    if not goal.loose and with_leader(top) >= needed and top.leaders >= 1:
        top = _best_fit(ordered, needed, with_leader, 1)
    if with_leader(top) >= needed and top.leaders >= 1:
        return idx, [top]
    if goal.required:
        return goal.not_fit(top.slices, stats)
    if idx > 0 and not goal.loose:
        return fit_level(by_level, idx - 1, goal, stats)
    return _spread(idx, ordered, goal, stats)


def _spread(idx: int, ordered: list[Domain], goal: Goal,
            stats: Stats) -> tuple[int, list[Domain]] | str:
    """A preferred request at the top level: the leader's domain first, then the others by their free slices."""
    needed = remaining = goal.needed
    ordered = _prioritize(ordered, goal.count, goal.size, True)
    chosen: list[Domain] = []
    leaders, i = 1, 0
    while leaders > 0 and i < len(ordered) and ordered[i].leaders > 0:
        domain = ordered[i]
        if not goal.loose and domain.slices_with >= remaining:
            domain = _best_fit(ordered[i:], remaining, lambda d: d.slices_with, leaders)
        chosen.append(domain)
        leaders -= domain.leaders
        remaining -= domain.slices_with
        i += 1
    if leaders > 0:
        return goal.not_fit(0, stats)
    rest = _sorted(ordered[i:], goal.loose)
    for j, domain in enumerate(rest):
        if remaining <= 0:
            break
        if not goal.loose and domain.slices >= remaining:
            domain = _best_fit(rest[j:], remaining, lambda d: d.slices, 0)
        chosen.append(domain)
        remaining -= domain.slices
    if remaining > 0:
        return goal.not_fit(needed - remaining, stats)
    return idx, chosen


def _prioritize(domains: list[Domain], count: int, size: int, slices: bool) -> list[Domain]:
    """Kueue's ``prioritizeLeaderDomain``: the first domain that can hold the leader and, with the leader's cost
    taken off, leaves room for every worker moves to the front."""
    if len(domains) < 2:
        return domains
    needed = count // size if slices else count
    available = sum(d.slices if slices else d.pods for d in domains)
    for i, domain in enumerate(domains):
        if domain.leaders < 1:
            continue
        cost = domain.slices - domain.slices_with if slices else domain.pods - domain.pods_with
        if available - cost < needed:
            continue
        return domains if i == 0 else [domain, *domains[:i], *domains[i + 1:]]
    return domains


@dataclass(frozen=True, slots=True)
class Down:
    """Kueue's ``updateCountsToMinimumGeneric`` with leaders, for one placement."""

    loose: bool

    def to_minimum(self, domains: list[Domain], count: int, leaders: int, size: int,
                   slices: bool) -> list[Domain]:
        """``count`` pods (``slices``: in slices of ``size``) and ``leaders`` over ``domains`` in their order, the
        leader's first; each chosen domain's pods and leaders set to what it takes."""
        domains = _prioritize(domains, count, size, slices) if leaders > 0 else domains
        remaining = count // size if slices else count
        result: list[Domain] = []
        unit = size if slices else 1

        def held(d: Domain) -> int:
            return d.slices if slices else d.pods

        for i, domain in enumerate(domains):
            if leaders > 0:
                domain, done, leaders, remaining = self._with_leader(domains[i:], domain, leaders, remaining, unit,
                                                                     slices)
                result.append(domain)
                if done:
                    return result
                continue
            if not self.loose and held(domain) >= remaining:
                domain = _best_fit(domains[i:], remaining, held, 0)
            domain.leaders = 0
            result.append(domain)
            if held(domain) >= remaining:
                domain.pods = remaining * unit
                if slices:
                    domain.slices = remaining
                return result
            taken = held(domain)
            domain.pods = taken * unit
            remaining -= taken
        return result

    def _with_leader(self, rest: list[Domain], domain: Domain, leaders: int, remaining: int, unit: int,
                     slices: bool) -> tuple[Domain, bool, int, int]:
        """Kueue's ``consumeWithLeadersGeneric``: the domain taken, whether it completes the placement, and the
        leaders and workers (slices or pods) still to place."""

        def with_leader(d: Domain) -> int:
            return d.slices_with if slices else d.pods_with

        if not self.loose and with_leader(domain) >= remaining and domain.leaders >= leaders:
            domain = _best_fit(rest, remaining, with_leader, leaders)
        if with_leader(domain) >= remaining and domain.leaders >= leaders:
            domain.leaders = leaders
            domain.pods = remaining * unit
            if slices:
                domain.slices = remaining
            return domain, True, 0, 0
        taken = min(with_leader(domain), remaining)
        domain.leaders = min(domain.leaders, leaders)
        if slices:
            domain.slices = domain.slices_with = taken
        else:
            domain.pods_with = taken
        domain.pods = taken * unit
        return domain, False, leaders - domain.leaders, remaining - taken
