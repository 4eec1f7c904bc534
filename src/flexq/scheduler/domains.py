"""Topology-aware scheduling: where in a flavor's node topology a pod set's pods go, as Kueue's TAS places them.

A topology-aware flavor (``ResourceFlavor.spec.topologyName``) names a Topology: node labels, highest level first
(block, sub-block, host, ``kubernetes.io/hostname``). Its nodes (ready, with the flavor's labels and every level's
label) form a tree of domains; a leaf's free capacity is its nodes' allocatable less what pods of workloads that are
not topology-aware use there and what the topology assignments of admitted workloads hold there. Each domain counts
how many of the pod set's pods fit in it (a leaf: its free capacity divided by one pod's requests; above: the sum of
its children) and, where slices are asked, how many whole slices.

The placement follows Kueue's ``findTopologyAssignment`` (BestFit profile, no leader pod sets):

1. at the requested level, the domains are sorted most free slices first, then fewest free pods, then by their
   values; if the first can hold every slice, the one among them that holds them with the least to spare takes all;
2. otherwise a ``required`` request fails; a ``preferred`` one tries the level above, and at the top level spreads
   over as few domains as it can (the last one chosen by best fit);
3. from the chosen domains down to the lowest level, each domain's pods go to its children the same way.

An ``unconstrained`` request (as a ClusterQueue whose flavors are all topology-aware implies for a pod set that
asks nothing) uses Kueue's LeastFreeCapacity order at the lowest level instead: the fullest domain that holds them
all, else the fullest first. Where the lowest level is ``kubernetes.io/hostname`` the assignment names hosts only.

Nothing here reads a clock: :class:`TopologyView` is built for one moment (``now``) by the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Protocol

from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    Taint,
    Toleration,
    TopologyAssignment,
    TopologyRequest,
    affinity_matches,
)
from flexq.scheduler.tas_balanced import Domain, balanced_domains

__all__ = ["HOSTNAME", "Domain", "DomainBase", "Goal", "Stats", "TopologyNode", "TopologyView", "assignment_of",
           "by_node", "count_in", "domain_base", "domain_tree", "domains_by_level", "fits", "holding", "inner_sizes",
           "no_domains",
           "place", "request_levels", "subtract_held", "tas_implied", "tas_match"]

HOSTNAME: Final = "kubernetes.io/hostname"


class TopologyNode(Protocol):
    """What topology-aware scheduling reads of a node (the capacity's nodes are such)."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def taints(self) -> tuple[Taint, ...]: ...

    @property
    def allocatable(self) -> Mapping[str, int]: ...

    @property
    def pods(self) -> Mapping[str, Mapping[str, int]]: ...

    def ready(self, now: float) -> bool: ...


UsageOf = Callable[[str], Iterable[tuple[TopologyAssignment, Mapping[str, int]]]]
"""The topology assignments held on a Topology (by its name), each with one pod's requests."""


@dataclass(frozen=True, slots=True)
class TopologyView:
    """The nodes at one moment, and who holds what of them: what every placement of a cycle reads.

    ``topology_held(key)``: whether workload ``key``'s pods count through its topology assignment (not through the
    pods on the nodes); ``usage``: the assignments held on a Topology."""

    nodes: Sequence[TopologyNode]
    now: float
    topology_held: Callable[[str], bool]
    usage: UsageOf
    balanced: bool = False
    """Kueue's ``TASBalancedPlacement`` (:mod:`flexq.scheduler.tas_balanced`)."""

    def plus(self, topology: str, held: Sequence[tuple[TopologyAssignment, Mapping[str, int]]]) -> TopologyView:
        """This view with ``held`` (the earlier pod sets of the workload being placed) held on ``topology`` too."""
        if not held:
            return self
        usage = self.usage

        def more(name: str) -> Iterable[tuple[TopologyAssignment, Mapping[str, int]]]:
            return [*usage(name), *held] if name == topology else usage(name)

        return replace(self, usage=more)


@dataclass(slots=True)
class Stats:
    """Kueue's exclusion counts, told in the message when nothing fits."""

    total: int = 0
    selector: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)
    affinity: int = 0

    def text(self) -> str:
        reasons = ([f"nodeSelector: {self.selector}"] if self.selector else []) + \
            ([f"affinity: {self.affinity}"] if self.affinity else []) + \
            [f'taint "{t}": {n}' for t, n in self.taints.items()] + \
            [f'resource "{r}": {n}' for r, n in self.resources.items()]
        return f". Total nodes: {self.total}; excluded: {', '.join(sorted(reasons))}" if reasons else ""


def tas_implied(cq: ClusterQueueSpec, flavors: Mapping[str, FlavorSpec]) -> bool:
    """Kueue's TAS-only ClusterQueue: every flavor of every resource group is topology-aware."""
    names = [f for group in cq.groups for f in group.flavors]
    return bool(names) and all(f in flavors and flavors[f].topology for f in names)


def tas_match(podset: PodSet, flavor: FlavorSpec, implied: bool) -> str:
    """Kueue's ``checkPodSetAndFlavorMatchForTAS``: why ``flavor`` cannot take ``podset`` for topology reasons (empty:
    it can). ``implied``: every flavor of the ClusterQueue is topology-aware, so a pod set that asks nothing is
    placed unconstrained."""
    request = podset.topology
    if request is not None or implied:
        if not flavor.topology:
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
        if not flavor.levels:
            return f'Flavor "{flavor.name}" information missing in TAS cache'
        if request is None:
            return ""
        if any(level and level not in flavor.levels for level in (request.level, request.slice_level)):
            return f'Flavor "{flavor.name}" does not contain the requested level'
        return ""
    if flavor.topology:
        return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
    return ""


@dataclass(frozen=True, slots=True)
class DomainBase:
    """A flavor's domain tree for one pod set, as one view gives it with what every holder holds taken off: built
    once for a search that places the same pod set again and again, each time with some holders set aside
    (:func:`place`'s ``base``). Its domains are kept parents first, each child in its place among its siblings, so a
    tree made again from them is the very tree."""

    domains: tuple[tuple[tuple[str, ...], int, int, Mapping[str, int] | None], ...]
    """(values, the parent's index or -1 for a root, nodes, free capacity or None above the leaves) of each domain."""
    total: int
    selector: int
    taints: Mapping[str, int]
    affinity: int = 0

    def tree(self) -> tuple[list[Domain], dict[tuple[str, ...], Domain], Stats]:
        """A fresh tree (each placement changes its domains' counts), its leaves, and the stats of its build."""
        made: list[Domain] = []
        roots: list[Domain] = []
        leaves: dict[tuple[str, ...], Domain] = {}
        for values, parent, nodes, free in self.domains:
            domain = Domain(values)
            (roots if parent < 0 else made[parent].children).append(domain)
            made.append(domain)
            if free is not None:
                domain.nodes, domain.free = nodes, dict(free)
                leaves[values] = domain
        return roots, leaves, Stats(self.total, self.selector, dict(self.taints), affinity=self.affinity)


def domain_base(view: TopologyView, flavor: FlavorSpec, podset: PodSet,
                tolerations: Sequence[Toleration]) -> DomainBase:
    """The tree :func:`place` would build for ``podset`` on ``flavor`` in ``view``, with the view's holders'
    assignments taken off its leaves."""
    stats = Stats()
    roots, leaves = domain_tree(view, flavor, podset, tolerations, stats)
    subtract_held(view, flavor, leaves)
    depth = len(flavor.levels)
    out: list[tuple[tuple[str, ...], int, int, Mapping[str, int] | None]] = []

    def walk(domain: Domain, parent: int) -> None:
        index = len(out)
        out.append((domain.values, parent, domain.nodes, dict(domain.free) if len(domain.values) == depth else None))
        for child in domain.children:
            walk(child, index)

    for root in roots:
        walk(root, -1)
    return DomainBase(tuple(out), stats.total, stats.selector, dict(stats.taints), stats.affinity)




def holding(placed: TopologyAssignment, podset: PodSet) -> tuple[TopologyAssignment, Mapping[str, int]]:
    """What ``podset`` placed at ``placed`` holds of its nodes, as a view's usage counts it (its requests per pod,
    and a pod as 1000 of ``pods``)."""
    return placed, {**podset.requests, "pods": 1000}

def request_levels(request: TopologyRequest, levels: tuple[str, ...]) -> tuple[int, int, int, int, bool] | str:
    """How ``request`` reads on a topology of ``levels``: (the slice size, the lowest level's index, the slice
    level's, the requested level's, whether placement is unconstrained), or why it cannot be placed (Kueue's
    message). A request of slices only is placed from the highest level, unconstrained (Kueue's levelKey)."""
    size = max(1, request.slice_size) if request.slice_level else 1
    lowest = len(levels) - 1
    slice_idx = levels.index(request.slice_level) if request.slice_level else lowest
    loose = request.unconstrained or not request.level
    level_idx = levels.index(request.level) if request.level else (0 if request.slice_level else lowest)
    if slice_idx < level_idx:
        return f"podset slice topology {request.slice_level} is above the podset topology {request.level}"
    return size, lowest, slice_idx, level_idx, loose

def place(view: TopologyView, flavor: FlavorSpec, podset: PodSet, request: TopologyRequest,
          tolerations: Sequence[Toleration], empty: bool = False,
          base: DomainBase | None = None) -> TopologyAssignment | str:
    """Where ``podset``'s pods go on ``flavor``'s nodes (or why they cannot: Kueue's message). ``empty``: as if no
    other topology-aware workload held anything (Kueue's ``simulateEmpty``, asked before preempting). ``base``: the
    leaves :func:`domain_base` built for this pod set and flavor; the view's usage is then what changed since (a
    holder set aside: its assignment with negative requests)."""
    levels = flavor.levels
    per_pod = {r: v for r, v in podset.requests.items() if v > 0}
    per_pod["pods"] = 1000
    if base is not None:
        roots, leaves, stats = base.tree()
    else:
        stats = Stats()
        roots, leaves = domain_tree(view, flavor, podset, tolerations, stats)
    if not empty:
        subtract_held(view, flavor, leaves)
    read = request_levels(request, levels)
    if isinstance(read, str):
        return read
    size, lowest, slice_idx, level_idx, loose = read
    inner = inner_sizes(request, levels, slice_idx)
    if isinstance(inner, str):
        return inner
    for leaf in leaves.values():
        leaf.pods = count_in(per_pod, leaf.free, stats)
    if not by_node(levels):
        stats.total = len(leaves)
    for root in roots:
        _fill(root, size, slice_idx, 0, inner)
    by_level = domains_by_level(roots, len(levels))
    goal = Goal(podset.count, size, request.required, loose, flavor.topology, levels)
    balanced = balanced_domains(by_level, level_idx, slice_idx, podset.count, size) \
        if view.balanced and not request.required and not loose else None
    if balanced is not None:
        idx, domains = balanced
        domains = _to_minimum(domains, podset.count, size, loose)
    else:
        chosen = _fit_level(by_level, level_idx, goal, stats)
        if isinstance(chosen, str):
            if request.layers and chosen.startswith("topology "):
                return _layers_not_fit(by_level, level_idx if request.required or loose else 0, podset.count,
                                       request, goal, stats)
            return chosen
        idx, domains = chosen
        domains = _to_minimum(domains, podset.count, size, loose)
        while idx < min(lowest, slice_idx):
            domains = _to_minimum(_sorted([c for d in domains for c in d.children], loose), podset.count, size, loose)
            idx += 1
    while idx < lowest:
        # slices above the slice level; below it, an inner slice layer's groups, else pods
        step = size if idx < slice_idx else inner.get(idx + 1, 1)
        domains = [c for d in domains for c in _to_minimum(_regroup(_sorted(d.children, loose), step), d.pods, step,
                                                           loose)]
        idx += 1
    return assignment_of(levels, domains)


def inner_sizes(request: TopologyRequest, levels: Sequence[str], slice_idx: int) -> dict[int, int] | str:
    """Kueue's ``buildSliceSizeAtLevel``: the group size each level below the outermost slice layer places in (by
    level index: every level down to an inner layer's takes that layer's size), or why the layers cannot be placed
    on ``levels`` (Kueue's message)."""
    out: dict[int, int] = {}
    prev_idx, prev_size = slice_idx, max(1, request.slice_size)
    for level, size in request.layers[1:]:
        if level not in levels:
            return f"no requested topology level for additional slice layer: {level}"
        idx = levels.index(level)
        if idx <= prev_idx:
            return f"additional slice layer topology {level} must be at a lower level than {levels[prev_idx]}"
        if prev_size % size:
            return f"additional slice layer size {size} must evenly divide parent layer size {prev_size}"
        for at in range(prev_idx + 1, idx + 1):
            out[at] = size
        prev_idx, prev_size = idx, size
    return out


def no_domains(goal: Goal, idx: int, stats: Stats) -> str:
    """Why no domain of level ``idx`` takes the pods where the tree has none: the flavor has no node (Kueue's "no
    topology domains"), or the per-node check left out every one it has. Kueue's tree keeps a node left out, with room
    for no pod, so it then says that none fits and counts the nodes left out."""
    if stats.total:
        return goal.not_fit(0, stats)
    return f"no topology domains at level: {goal.levels[idx]}"


def _layers_not_fit(by_level: list[list[Domain]], idx: int, count: int, request: TopologyRequest, goal: Goal,
                    stats: Stats) -> str:
    """Kueue's ``multiLayerNotFitMessage``: how many slices of each layer the best domain of the level searched
    holds."""
    text = f'topology "{goal.topology}" doesn\'t allow to fit'
    if not by_level[idx]:
        if not stats.total:
            return text
        # every node left out: Kueue's best domain is one of theirs, with room for no slice of any layer
        return text + "".join(f"; 0/{count // size} slice(s) fit on level {level}" for level, size in request.layers
                              if level in goal.levels) + stats.text()
    best = min(by_level[idx], key=lambda d: (-d.slices, ",".join(d.values)))
    for level, size in request.layers:
        if level in goal.levels:
            fit = _slices_in(best, idx, goal.levels.index(level), size)
            text += f"; {fit}/{count // size} slice(s) fit on level {level}"
    return text + stats.text()


def _slices_in(domain: Domain, level: int, target: int, size: int) -> int:
    if level == target:
        return domain.pods // size
    return sum(_slices_in(c, level + 1, target, size) for c in domain.children)


def _regroup(domains: list[Domain], step: int) -> list[Domain]:
    """Below the slice level, an inner layer's groups of ``step`` pods are what each domain holds."""
    if step > 1:
        for domain in domains:
            domain.slices = domain.pods // step
    return domains


def by_node(levels: Sequence[str]) -> bool:
    """The Topology's lowest level is the node: its assignments name hosts only."""
    return bool(levels) and levels[-1] == HOSTNAME


@dataclass(frozen=True, slots=True)
class Goal:
    """What one placement looks for: ``count`` pods in slices of ``size``; ``loose``: Kueue's unconstrained."""

    count: int
    size: int
    required: bool
    loose: bool
    topology: str
    levels: tuple[str, ...]

    @property
    def needed(self) -> int:
        return self.count // self.size

    def not_fit(self, fit: int, stats: Stats) -> str:
        """Kueue's ``notFitMessage``."""
        unit = "pod" if self.size == 1 else "slice"
        if fit == 0:
            return f'topology "{self.topology}" doesn\'t allow to fit any of {self.needed} {unit}(s){stats.text()}'
        return f'topology "{self.topology}" allows to fit only {fit} out of {self.needed} {unit}(s){stats.text()}'


def fits(view: TopologyView, flavor: FlavorSpec, podset: PodSet, assignment: TopologyAssignment) -> bool:
    """Whether every domain of ``assignment`` still has room for its pods (Kueue checks a nominated workload's
    topology usage again before admitting it)."""
    per_pod = {r: v for r, v in podset.requests.items() if v > 0}
    per_pod["pods"] = 1000
    _roots, leaves = domain_tree(view, flavor, podset, (*podset.tolerations, *flavor.tolerations), Stats())
    subtract_held(view, flavor, leaves)
    by_host = {values[-1]: leaf for values, leaf in leaves.items()} if by_node(flavor.levels) else {}
    for values, count in assignment.domains:
        leaf = by_host.get(values[-1]) if by_host else leaves.get(values)
        if leaf is None or count_in(per_pod, leaf.free, Stats()) < count:
            return False
    return True


def domain_tree(view: TopologyView, flavor: FlavorSpec, podset: PodSet, tolerations: Sequence[Toleration],
          stats: Stats) -> tuple[list[Domain], dict[tuple[str, ...], Domain]]:
    """The flavor's domain tree: its roots, and its leaves by their values (free capacity: allocatable less the pods
    of workloads not held by topology)."""
    levels = flavor.levels
    domains: dict[tuple[str, ...], Domain] = {}
    roots: list[Domain] = []
    for node in sorted(view.nodes, key=lambda n: n.name):
        labels = node.labels
        if not node.ready(view.now) or any(labels.get(k) != v for k, v in flavor.node_labels.items()) or \
                any(level not in labels for level in levels):
            continue
        stats.total += 1
        if by_node(levels) and _excluded(node, podset, tolerations, stats):
            continue
        path = tuple(labels[level] for level in levels)
        leaf = _domain(domains, roots, path)
        leaf.nodes += 1
        for resource, amount in node.allocatable.items():
            leaf.free[resource] = leaf.free.get(resource, 0) + amount
        for key, used in node.pods.items():
            if not view.topology_held(key):
                for resource, amount in used.items():
                    leaf.free[resource] = leaf.free.get(resource, 0) - amount
    return roots, {values: d for values, d in domains.items() if len(values) == len(levels)}


def _domain(domains: dict[tuple[str, ...], Domain], roots: list[Domain], path: tuple[str, ...]) -> Domain:
    found = domains.get(path)
    if found is not None:
        return found
    made = domains[path] = Domain(path)
    if len(path) == 1:
        roots.append(made)
    else:
        _domain(domains, roots, path[:-1]).children.append(made)
    return made


def _excluded(node: TopologyNode, podset: PodSet, tolerations: Sequence[Toleration], stats: Stats) -> bool:
    """A node the pod set's pods could not go on (hostname-level topologies check each node, as Kueue does)."""
    for taint in node.taints:  # taints first, as Kueue's feasibility check
        if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in tolerations):
            name = f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"
            stats.taints[name] = stats.taints.get(name, 0) + 1
            return True
    if any(node.labels.get(k) != v for k, v in podset.node_selector.items()):
        stats.selector += 1
        return True
    if podset.affinity and not affinity_matches(podset.affinity, node.name, node.labels):
        stats.affinity += 1  # the pod's whole required node affinity, its matchFields on the node's name too
        return True
    return False


def subtract_held(view: TopologyView, flavor: FlavorSpec, leaves: Mapping[tuple[str, ...], Domain]) -> None:
    """What admitted workloads' topology assignments hold on the flavor's Topology comes off their leaves."""
    by_host = {values[-1]: leaf for values, leaf in leaves.items()} if by_node(flavor.levels) else {}
    for assignment, per_pod in view.usage(flavor.topology):
        for values, count in assignment.domains:
            leaf = by_host.get(values[-1]) if len(values) == 1 and by_host else leaves.get(values)
            if leaf is None:
                continue
            for resource, amount in per_pod.items():
                leaf.free[resource] = leaf.free.get(resource, 0) - amount * count


def count_in(per_pod: Mapping[str, int], free: Mapping[str, int], stats: Stats) -> int:
    """How many pods fit in ``free``; a leaf that fits none counts against its most limiting resource."""
    counts = sorted((max(0, free.get(r, 0)) // v, r) for r, v in per_pod.items())
    count, limiting = counts[0]
    if count == 0:
        stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
    return count


def _fill(domain: Domain, size: int, slice_idx: int, level: int, inner: Mapping[int, int]) -> None:
    """Kueue's ``fillInCounts``: pods and whole slices a domain holds (slices counted at the slice level and summed
    above it; where an inner slice layer groups the pods of a level, a domain of it counts whole groups only)."""
    if domain.children:
        group = inner.get(level + 1, 1)
        for child in domain.children:
            _fill(child, size, slice_idx, level + 1, inner)
        domain.pods = sum(c.pods // group * group for c in domain.children)
        domain.slices = sum(c.slices for c in domain.children)
    if level == slice_idx:
        domain.slices = domain.pods // size


def domains_by_level(roots: list[Domain], depth: int) -> list[list[Domain]]:
    out: list[list[Domain]] = [roots]
    for _ in range(depth - 1):
        out.append([c for d in out[-1] for c in d.children])
    return out


def _sorted(domains: Iterable[Domain], unconstrained: bool) -> list[Domain]:
    """BestFit: most free slices first; LeastFreeCapacity (unconstrained): fewest first; then fewest pods, values."""
    sign = 1 if unconstrained else -1
    return sorted(domains, key=lambda d: (sign * d.slices, d.pods, d.values))


def _best_fit(domains: Sequence[Domain], needed: int, slices: bool) -> Domain:
    """The first domain holding ``needed`` with the least to spare (the first domain where none holds it)."""
    best, best_count = domains[0], None
    for domain in domains:
        count = domain.slices if slices else domain.pods
        if count >= needed and (best_count is None or count < best_count):
            best, best_count = domain, count
    return best


def _fit_level(by_level: list[list[Domain]], idx: int, goal: Goal, stats: Stats) -> tuple[int, list[Domain]] | str:
    """Kueue's ``findLevelWithFitDomains``: the level placed at and the domains there that take the pods."""
    if not by_level[idx]:
        return no_domains(goal, idx, stats)
    ordered = _sorted(by_level[idx], goal.loose)
    needed = goal.needed
    if goal.loose:
        for domain in ordered:
            if domain.slices >= needed:
                return idx, [domain]
    elif ordered[0].slices >= needed:
        return idx, [_best_fit(ordered, needed, True)]
    if goal.required:
        return goal.not_fit(ordered[0].slices, stats)
    if idx > 0 and not goal.loose:
        return _fit_level(by_level, idx - 1, goal, stats)
    chosen: list[Domain] = []
    remaining = needed
    for i, domain in enumerate(ordered):
        if remaining <= 0:
            break
        if not goal.loose and domain.slices >= remaining:
            domain = _best_fit(ordered[i:], remaining, True)
        chosen.append(domain)
        remaining -= domain.slices
    if remaining > 0:
        return goal.not_fit(needed - remaining, stats)
    return idx, chosen


def _to_minimum(domains: list[Domain], count: int, size: int, unconstrained: bool) -> list[Domain]:
    """Kueue's ``updateCountsToMinimum``: ``count`` pods (in slices of ``size``) over ``domains`` in their order, the
    last one chosen by best fit; each chosen domain's pods set to what it takes."""
    result: list[Domain] = []
    remaining = count // size
    for i, domain in enumerate(domains):
        held = domain.slices if size > 1 else domain.pods
        if not unconstrained and held >= remaining:
            domain = _best_fit(domains[i:], remaining, size > 1)
            held = domain.slices if size > 1 else domain.pods
        if held >= remaining:
            domain.pods, domain.slices = remaining * size, remaining
            result.append(domain)
            return result
        domain.pods = held * size
        remaining -= held
        result.append(domain)
    return result


def assignment_of(levels: tuple[str, ...], domains: list[Domain]) -> TopologyAssignment:
    """Kueue's ``buildAssignment``: by values; hosts only where the lowest level is ``kubernetes.io/hostname``."""
    start = len(levels) - 1 if by_node(levels) else 0
    ordered = sorted((d for d in domains if d.pods > 0), key=lambda d: d.values)
    return TopologyAssignment(levels[start:], tuple((d.values[start:], d.pods) for d in ordered))
