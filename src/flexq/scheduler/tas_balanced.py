"""Kueue's balanced placement (feature gate ``TASBalancedPlacement``, alpha and off by default in v0.19;
pkg/cache/scheduler/tas_balanced_placement.go): a ``preferred`` topology request that one domain of its level cannot
hold is spread evenly over the fewest domains, instead of filling the freest first.

As Kueue's ``findBestDomainsForBalancedPlacement`` and ``applyBalancedPlacementAlgorithm``, for a pod set without a
leader (a pod-set group is placed by BestFit):

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

__all__ = ["Domain", "balanced_domains"]


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
                     size: int) -> tuple[int, list[Domain]] | None:
    """The level placed at and its domains, each with the pods it takes (in ``pods`` and ``slices``); None: fall back
    to BestFit. ``by_level``: the filled domain tree by level."""
    needed = count // size
    best = _best_set(by_level, level_idx, slice_idx, needed, size)
    if best is None:
        return None
    threshold, domains = best
    fit_idx = level_idx
    if level_idx < slice_idx:
        chosen = _optimal_set(domains, needed, size, by_entropy=True)
        if chosen is None:
            return None
        domains = [c for d in chosen for c in d.children]
        fit_idx = level_idx + 1
    placed = _spread(domains, needed, size, threshold)
    return None if placed is None else (fit_idx, placed)


def _best_set(by_level: list[list[Domain]], level_idx: int, slice_idx: int, needed: int,
              size: int) -> tuple[int, list[Domain]] | None:
    """The sibling set with the highest threshold, pruned to it, and the threshold; None: none fits."""
    if level_idx == 0:
        groups = [by_level[0]]
    else:
        groups = [d.children for d in sorted(by_level[level_idx - 1], key=lambda d: d.values)]
    best: tuple[int, int, list[Domain]] | None = None  # threshold, domains at the requested level, the set
    for group in groups:
        candidates = [_clone(d) for d in group]
        lower = [c for d in candidates for c in d.children] if level_idx < slice_idx else candidates
        greedy = _greedy(lower, needed)
        if greedy is None:
            continue
        used, last = greedy
        threshold = min(needed // used, last.slices)
        if threshold <= 0 or (best is not None and threshold < best[0]):
            continue
        _prune(candidates, threshold, size, slice_idx, level_idx)
        after = _greedy(candidates, needed)
        if after is None:
            continue
        if best is None or threshold > best[0] or after[0] < best[1]:
            best = (threshold, after[0], candidates)
    return None if best is None else (best[0], best[2])


def _sorted(domains: Sequence[Domain]) -> list[Domain]:
    return sorted(domains, key=lambda d: (-d.slices, d.pods, d.values))


def _greedy(domains: Sequence[Domain], needed: int) -> tuple[int, Domain] | None:
    """Kueue's ``evaluateGreedyAssignment``: how many domains, freest first, hold ``needed`` slices, and the last
    one; None: they do not."""
    used, remaining, last = 0, needed, None
    for domain in _sorted(domains):
        if remaining <= 0 or domain.slices <= 0:
            break
        used, remaining, last = used + 1, remaining - domain.slices, domain
    return None if remaining > 0 or last is None else (used, last)


def _clone(domain: Domain) -> Domain:
    return copy.deepcopy(domain)


def _clear(domain: Domain) -> None:
    domain.pods = domain.slices = 0
    for child in domain.children:
        _clear(child)


def _refill(domain: Domain, size: int, slice_idx: int, level: int) -> None:
    if domain.children:
        for child in domain.children:
            _refill(child, size, slice_idx, level + 1)
        domain.pods = sum(c.pods for c in domain.children)
        domain.slices = sum(c.slices for c in domain.children)
    if level == slice_idx:
        domain.slices = domain.pods // size


def _prune(domains: list[Domain], threshold: int, size: int, slice_idx: int, level: int) -> None:
    """Kueue's ``pruneDomainsBelowThreshold``: children, then the domains, holding fewer slices than ``threshold``
    are emptied."""
    for domain in domains:
        for child in domain.children:
            if child.slices < threshold:
                _clear(child)
    for domain in domains:
        _refill(domain, size, slice_idx, level)
        if domain.slices < threshold:
            _clear(domain)


def _entropy(domain: Domain) -> float:
    total = sum(c.pods for c in domain.children)
    if total <= 0:
        return 0.0
    return -sum(c.pods / total * math.log2(c.pods / total) for c in domain.children if c.pods > 0)


def _optimal_set(domains: Sequence[Domain], needed: int, size: int, by_entropy: bool) -> list[Domain] | None:
    """Kueue's ``selectOptimalDomainSetToFit``: as many domains as a greedy fill needs, holding ``needed`` slices
    with the least to spare; None: they cannot."""
    greedy = _greedy(domains, needed)
    if greedy is None:
        return None
    many = greedy[0]
    if by_entropy:
        ordered = sorted(domains, key=lambda d: (-d.slices, -_entropy(d), d.values))
    else:
        ordered = sorted(domains, key=lambda d: d.values)
    # placements[i][left]: the first combination found of i domains leaving ``left`` pods to place.
    placements: list[dict[int, list[Domain]]] = [{} for _ in range(many + 1)]
    placements[0][needed * size] = []
    for domain in ordered:
        if domain.slices <= 0:
            continue
        for i in range(many, 0, -1):
            for left in sorted(placements[i - 1]):
                if left <= 0:
                    continue
                placements[i].setdefault(left - domain.pods, [*placements[i - 1][left], domain])
    fitting = [left for left in placements[many] if left <= 0]
    return placements[many][max(fitting)] if fitting else None


def _spread(domains: Sequence[Domain], needed: int, size: int, threshold: int) -> list[Domain] | None:
    """Kueue's ``placeSlicesOnDomainsBalanced``: the threshold on each chosen domain, the rest on the freest."""
    chosen = _optimal_set(domains, needed, size, by_entropy=False)
    if chosen is None or needed < len(chosen) * threshold:
        return None
    extra = needed - len(chosen) * threshold
    out = []
    for domain in _sorted(chosen):
        take = min(domain.slices - threshold, extra)
        domain.slices = threshold + take
        domain.pods = domain.slices * size
        extra -= take
        out.append(domain)
    return None if extra > 0 else out
