"""Kueue's balanced placement (feature gate ``TASBalancedPlacement``, alpha and off by default in v0.19;
pkg/cache/scheduler/tas_balanced_placement.go): a ``preferred`` topology request that one domain of its level cannot
hold is spread evenly over the fewest domains, instead of filling the freest first.

As Kueue's ``findBestDomainsForBalancedPlacement`` and ``applyBalancedPlacementAlgorithm``, for a pod set alone and
for a pod set group's workers with their leader (Kueue's leader-aware variant of each step: a domain that can hold
the leader counts the slices that fit beside it; the greedy fill takes the leader's domain first; a set pruned to a
threshold that leaves no room for the leader is tried again at the threshold that does; the leader's domain takes
the threshold, or more of what fits beside the leader):

- each set of sibling domains at the requested level (the children of one domain a level up; at the top level, all
  of them) is tried: the fewest domains a level below (at the requested level, where it is the slice level) that a
  greedy fill needs give a threshold, the most slices every one of them can take (the slices over that many domains,
  and no more than the last one filled holds); domains below the threshold are left out and the set must still fit;
- the set with the highest threshold wins (then the one needing fewest domains at the requested level);
- from it, the fewest domains that fit the request with the least to spare are chosen (a search over every
  combination of that many, by capacity, then the spread of their children's free pods, then name), and below the
  requested level, among their children, the same again; each chosen domain takes the threshold and the extra
  slices go to the freest, in order.

Where no set fits, or a step finds no domains, placement falls back to BestFit. Placement below the level chosen is
as BestFit does it, domain by domain.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Domain", "Greedy", "balanced_domains", "best_set", "greedy", "optimal_set", "prune", "spread"]


@dataclass(slots=True)
class Domain:
    """A topology domain being placed on (:mod:`flexq.scheduler.domains`): what is free in it, and the pods and
    whole slices it holds; for a pod set group (:mod:`flexq.scheduler.tas_groups`), whether its leader's pod fits
    (``leaders``: 0 or 1) and the workers' pods and slices that fit beside it."""

    values: tuple[str, ...]
    children: list[Domain] = field(default_factory=list)
    free: dict[str, int] = field(default_factory=dict)
    nodes: int = 0
    pods: int = 0
    slices: int = 0
    leaders: int = 0
    pods_with: int = 0
    slices_with: int = 0


def balanced_domains(by_level: list[list[Domain]], level_idx: int, slice_idx: int, count: int,
                     size: int, leaders: int = 0) -> tuple[int, list[Domain]] | None:
    """The level placed at and its domains, each with the pods it takes (in ``pods`` and ``slices``; the leader's
    domain with ``leaders`` 1); None: fall back to BestFit. ``by_level``: the filled domain tree by level;
    ``leaders``: a pod set group's leader pods to place with the workers (0 or 1)."""
    needed = count // size
    best = best_set(by_level, level_idx, slice_idx, needed, size, leaders)
    if best is None:
        return None
    threshold, domains = best
    fit_idx = level_idx
    if level_idx < slice_idx:
        chosen = optimal_set(domains, needed, size, True, leaders)
        if chosen is None:
            return None
        domains = [c for d in chosen for c in d.children]
        fit_idx = level_idx + 1
    placed = spread(domains, needed, size, threshold, leaders)
    return None if placed is None else (fit_idx, placed)


def best_set(by_level: list[list[Domain]], level_idx: int, slice_idx: int, needed: int,
              size: int, leaders: int) -> tuple[int, list[Domain]] | None:
    """The sibling set with the highest threshold, pruned to it, and the threshold; None: none fits. With a leader,
    a set that no longer fits once pruned is tried again at the lower threshold that keeps room for the leader."""
    if level_idx == 0:
        groups = [by_level[0]]
    else:
        groups = [d.children for d in sorted(by_level[level_idx - 1], key=lambda d: d.values)]
    best: tuple[int, int, list[Domain]] | None = None  # threshold, domains at the requested level, the set
    for group in groups:
        candidates = [_clone(d) for d in group]
        lower = [c for d in candidates for c in d.children] if level_idx < slice_idx else candidates
        fill = greedy(lower, needed, leaders)
        if fill is None:
            continue
        used, last_with, last = fill
        threshold = min(needed // used, *(d.slices_with for d in (last_with,) if d is not None),
                        *(d.slices for d in (last,) if d is not None))
        reserving = min(threshold, last.slices_with) if leaders and last is not None else threshold
        if threshold <= 0 or (best is not None and threshold < best[0]):
            continue
        prune(candidates, threshold, size, slice_idx, level_idx, leaders > 0)
        after = greedy(candidates, needed, leaders)
        if after is None and reserving < threshold:
            if reserving <= 0 or (best is not None and reserving < best[0]):
                continue
            threshold, candidates = reserving, [_clone(d) for d in group]
            prune(candidates, threshold, size, slice_idx, level_idx, leaders > 0)
            after = greedy(candidates, needed, leaders)
        if after is None:
            continue
        if best is None or threshold > best[0] or after[0] < best[1]:
            best = (threshold, after[0], candidates)
    return None if best is None else (best[0], best[2])


def _sorted(domains: Sequence[Domain]) -> list[Domain]:
    return sorted(domains, key=lambda d: (-d.slices, d.pods, d.values))


def _sorted_with_leader(domains: Sequence[Domain]) -> list[Domain]:
    """Kueue's ``sortedDomainsWithLeader`` (BestFit): those that can hold the leader first, then by what fits
    beside it."""
    return sorted(domains, key=lambda d: (-d.leaders, -d.slices_with, d.pods_with, d.values))


Greedy = tuple[int, Domain | None, Domain | None]
"""How many domains a greedy fill takes, the last one taken for a leader, and the last one taken without."""


def greedy(domains: Sequence[Domain], needed: int, leaders: int = 0) -> Greedy | None:
    """Kueue's ``evaluateGreedyAssignment``: how many domains hold ``needed`` slices (the leaders' first, freest
    beside a leader first, then the freest), the last one taken for a leader and the last one taken without; None:
    they do not."""
    used, remaining, left, last_with, last = 0, needed, leaders, None, None
    rest: Sequence[Domain] = domains
    if leaders > 0:
        ordered = _sorted_with_leader(domains)
        i = 0
        while left > 0 and i < len(ordered) and ordered[i].leaders > 0:
            last_with = ordered[i]
            used, left, remaining = used + 1, left - last_with.leaders, remaining - last_with.slices_with
            i += 1
        if left > 0:
            return None
        rest = ordered[i:]
    for domain in _sorted(rest):
        if remaining <= 0 or domain.slices <= 0:
            break
        used, remaining, last = used + 1, remaining - domain.slices, domain
    return None if remaining > 0 or used == 0 else (used, last_with, last)


def _clone(domain: Domain) -> Domain:
    return copy.deepcopy(domain)


def _clear(domain: Domain) -> None:
    domain.pods = domain.slices = domain.leaders = domain.pods_with = domain.slices_with = 0
    for child in domain.children:
        _clear(child)


def _clear_leader(domain: Domain) -> None:
    domain.leaders = domain.pods_with = domain.slices_with = 0
    for child in domain.children:
        _clear_leader(child)


def _refill(domain: Domain, size: int, slice_idx: int, level: int, leader: bool) -> None:
    """Kueue's ``fillInCountsHelper`` again after pruning (``leader``: with a leader required)."""
    if domain.children:
        for child in domain.children:
            _refill(child, size, slice_idx, level + 1, leader)
        domain.pods = sum(c.pods for c in domain.children)
        domain.slices = sum(c.slices for c in domain.children)
        if leader:
            holders = [c for c in domain.children if c.leaders > 0]
            domain.leaders = 1 if holders else 0
            domain.pods_with = domain.pods - min(c.pods - c.pods_with for c in holders) if holders else 0
            domain.slices_with = domain.slices - min(c.slices - c.slices_with for c in holders) if holders else 0
    if level == slice_idx:
        domain.slices = domain.pods // size
        if leader:
            domain.slices_with = domain.pods_with // size


def _prune_one(domain: Domain, threshold: int, leader: bool) -> None:
    """Kueue's ``pruneDomainNodeBelowThreshold``: a domain holding fewer slices than ``threshold`` is emptied; one
    that holds too few beside the leader can still take workers, not the leader."""
    if domain.slices < threshold:
        _clear(domain)
    elif leader and domain.leaders > 0 and domain.slices_with < threshold:
        _clear_leader(domain)


def prune(domains: list[Domain], threshold: int, size: int, slice_idx: int, level: int, leader: bool) -> None:
    """Kueue's ``pruneDomainsBelowThreshold``: children, then the domains, holding fewer slices than ``threshold``
    are emptied."""
    for domain in domains:
        for child in domain.children:
            _prune_one(child, threshold, leader)
    for domain in domains:
        _refill(domain, size, slice_idx, level, leader)
        _prune_one(domain, threshold, leader)


def _entropy(domain: Domain) -> float:
    total = sum(c.pods for c in domain.children)
    if total <= 0:
        return 0.0
    return -sum(c.pods / total * math.log2(c.pods / total) for c in domain.children if c.pods > 0)


def optimal_set(domains: Sequence[Domain], needed: int, size: int, by_entropy: bool,
                 leaders: int = 0) -> list[Domain] | None:
    """Kueue's ``selectOptimalDomainSetToFit``: as many domains as a greedy fill needs, holding ``needed`` slices
    (and the ``leaders``, a domain taking one with the workers that fit beside it) with the least to spare; None:
    they cannot."""
    fill = greedy(domains, needed, leaders)
    if fill is None:
        return None
    many = fill[0]
    if by_entropy:
        ordered = sorted(domains, key=lambda d: (-d.leaders, -(d.slices_with if leaders else d.slices), -_entropy(d),
                                                 d.values))
    else:
        ordered = sorted(domains, key=lambda d: d.values)
    # placements[i][(leaders left, pods left)]: the first combination found of i domains leaving them to place.
    placements: list[dict[tuple[int, int], list[Domain]]] = [{} for _ in range(many + 1)]
    placements[0][(leaders, needed * size)] = []
    for domain in ordered:
        for i in range(many, 0, -1):
            for before_leaders, before_pods in sorted(placements[i - 1]):
                if before_leaders <= 0 and before_pods <= 0:
                    continue
                taken = [*placements[i - 1][(before_leaders, before_pods)], domain]
                if before_leaders > 0 and domain.leaders > 0:
                    placements[i].setdefault((before_leaders - domain.leaders, before_pods - domain.pods_with), taken)
                if domain.slices > 0:
                    placements[i].setdefault((before_leaders, before_pods - domain.pods), taken)
    fitting = [left for led, left in placements[many] if led == 0 and left <= 0]
    return placements[many][(0, max(fitting))] if fitting else None


def spread(domains: Sequence[Domain], needed: int, size: int, threshold: int, leaders: int = 0) -> list[Domain] | None:
    """Kueue's ``placeSlicesOnDomainsBalanced``: the threshold on each chosen domain, the rest on the freest (the
    leader's domain first, what fits beside the leader)."""
    chosen = optimal_set(domains, needed, size, False, leaders)
    if chosen is None or needed < len(chosen) * threshold:
        return None
    extra = needed - len(chosen) * threshold
    out = []
    left = leaders
    for domain in _sorted_with_leader(chosen) if leaders else _sorted(chosen):
        if left > 0:
            take = min(domain.slices_with - threshold, extra)
            domain.leaders, left = 1, left - 1
        else:
            take = min(domain.slices - threshold, extra)
            domain.leaders = 0
        domain.slices = threshold + take
        domain.pods = domain.slices * size
        if leaders:
            domain.slices_with, domain.pods_with = domain.slices, domain.pods - domain.leaders
        extra -= take
        out.append(domain)
    return None if extra > 0 or left > 0 else out
