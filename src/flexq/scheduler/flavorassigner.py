"""Flavor assignment, as Kueue's flavor assigner decides it.

For each pod set, and within it each resource group the pod set asks of, the flavors are tried in the
ClusterQueue's order. All resources of a group in one pod set share a flavor; different pod sets may
get different flavors, but for the pod sets of one pod set group (Kueue's ``podSetGroupName``), which take
one for their summed requests; quota taken by earlier pod sets of the same workload counts. A flavor is
refused for an untolerated taint, or a node selector or required node affinity that contradicts its
labels (only the keys the flavor's own labels define are compared). Otherwise each resource gets a
mode and the flavor's mode is the worst one: NoFit < Preempt < Fit, with Preempt split as Kueue splits
it (no candidates < preempt < reclaim), and a borrowing level (0: no borrowing). ``flavorFungibility``
decides whether to stop at a flavor that needs borrowing or preemption, or to try the next one and take
the best.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from flexq.scheduler.domains import TopologyView, holding, place, tas_implied, tas_match
from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorResource,
    FlavorSpec,
    Granular,
    Mode,
    NodeSelectorTerm,
    PendingReason,
    PodSet,
    PreemptionPolicy,
    ResourceGroup,
    Taint,
    TopologyAssignment,
    TopologyRequest,
    Workload,
    affinity_matches,
    most_severe,
)
from flexq.scheduler.quota import QuotaTree
from flexq.scheduler.tas_groups import group_pairs, place_pair

__all__ = ["Assignment", "FlavorTry", "Oracle", "PodSetResult", "assign_flavors", "compatible", "fits_again",
           "format_amount", "node_matches", "reusable"]

_BINARY_RESOURCES = frozenset({"memory", "ephemeral-storage"})

Oracle = Callable[[FlavorResource, int], tuple[Granular, int]]
"""Asked when a resource fits only by preemption: what kind of preemption (none possible, within the
queue, reclaim from the cohort) and the borrowing level once its targets are gone."""


_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL_SUFFIXES = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def format_amount(resource: str, milli: int) -> str:
    """An amount in thousandths, as Kueue writes it: cpu in milli units, memory in binary units."""
    if milli % 1000:
        return f"{milli}m"  # a fraction of a unit is written in milli units, binary resources' included
    whole = milli // 1000
    if whole == 0:
        return "0"
    binary = resource in _BINARY_RESOURCES or resource.startswith("hugepages-")
    for suffix, size in _BINARY_SUFFIXES if binary else _DECIMAL_SUFFIXES:
        if whole % size == 0:  # exact multiples divide exactly, negative ones too
            return f"{whole // size}{suffix}"
    return f"{whole}"


@dataclass(frozen=True, slots=True)
class FlavorTry:
    """One flavor considered for one resource group of one pod set, and what came of it."""

    flavor: str
    granular: Granular
    borrow: int
    reasons: tuple[str, ...]
    needs_preemption: tuple[str, ...] = ()
    """The resources of this flavor that fit only by preemption."""
    no_fit: PendingReason | None = None
    """Why it does not fit (the most severe of its resources' reasons), as Kueue names it."""

    @property
    def mode(self) -> Mode:
        return self.granular.mode


@dataclass(frozen=True, slots=True)
class PodSetResult:
    name: str
    count: int
    flavors: Mapping[str, str]
    """resource -> flavor, for the resources assigned"""
    granular: Granular
    borrow: int
    usage: Mapping[FlavorResource, int]
    tried: tuple[FlavorTry, ...]
    reasons: tuple[str, ...]
    preempt: frozenset[FlavorResource] = frozenset()
    no_fit: PendingReason | None = None
    """Kueue's rule: in each resource group the least severe reason of the flavors that did not fit (they were
    alternatives), across groups the most severe (all are needed)."""
    topology: TopologyAssignment | None = None
    """Where its pods go on its topology-aware flavor (:mod:`flexq.scheduler.domains`)."""
    topology_blocked: bool = False
    """Its quota fits and its placement does not, but would on the flavor's nodes were others' pods gone: Kueue's
    Preempt for topology, whose victims must free a placement (:func:`~flexq.scheduler.tas.topology_check`)."""
    delayed: bool = False
    """Its topology-aware flavor has a ProvisioningRequest check: it is placed once the check is Ready, not now
    (Kueue's ``delayedTopologyRequest: Pending``)."""
    grouped: bool = False
    """Its flavors were chosen with another pod set's, for their summed requests (Kueue's ``podSetGroupName``)."""

    @property
    def mode(self) -> Mode:
        return self.granular.mode

    def message(self) -> str:
        return f"couldn't assign flavors to pod set {self.name}: {', '.join(sorted(self.reasons))}"


@dataclass(frozen=True, slots=True)
class Assignment:
    podsets: tuple[PodSetResult, ...]
    complete: bool = True
    """False when a pod set could not be placed and the later ones were not evaluated."""
    granular: Granular = field(init=False)
    """The worst pod set's mode (NO_FIT when incomplete)."""
    mode: Mode = field(init=False)

    def __post_init__(self) -> None:
        granular = min((p.granular for p in self.podsets), default=Granular.FIT) if self.complete \
            else Granular.NO_FIT
        object.__setattr__(self, "granular", granular)
        object.__setattr__(self, "mode", granular.mode)

    @property
    def borrow(self) -> int:
        return max((p.borrow for p in self.podsets), default=0)

    @property
    def no_fit(self) -> PendingReason | None:
        """Why the workload does not fit, as Kueue names it: the most severe of its pod sets that do not."""
        reason = None
        for ps in self.podsets:
            if ps.granular is Granular.NO_FIT:
                reason = most_severe(reason, ps.no_fit or PendingReason.NO_MATCHING_FLAVOR)
        return reason

    def usage(self) -> dict[FlavorResource, int]:
        total: dict[FlavorResource, int] = {}
        for ps in self.podsets:
            for fr, amount in ps.usage.items():
                total[fr] = total.get(fr, 0) + amount
        return total

    def message(self) -> str:
        """Why the workload does not simply fit (empty when it does), in Kueue's words."""
        return "; ".join(p.message() for p in self.podsets if p.granular is not Granular.FIT)

    @property
    def topology_blocked(self) -> bool:
        """Some pod set waits only for a placement that preemption could free (see :class:`PodSetResult`)."""
        return any(ps.topology_blocked for ps in self.podsets)

    def preempt_resources(self) -> set[FlavorResource]:
        """The (flavor, resource) pairs that need preemption."""
        out: set[FlavorResource] = set()
        for ps in self.podsets:
            out.update(ps.preempt)
        return out

    def __deepcopy__(self, memo: dict[int, object]) -> Assignment:
        """A value (frozen, its mappings read-only): a copy of the plane (a forecast's fork) shares it."""
        return self


def _untolerated(podset: PodSet, flavor: FlavorSpec) -> Taint | None:
    tolerations = (*podset.tolerations, *flavor.tolerations)
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def node_matches(podset: PodSet, flavor: FlavorSpec) -> bool:
    """nodeSelector and required affinity against the flavor's labels, on the flavor's own label keys."""
    labels = flavor.node_labels
    for key, value in podset.node_selector.items():
        if key in labels and labels[key] != value:
            return False
    if podset.affinity:  # Kueue's flavorSelector: only matchExpressions on the flavor's keys, matchFields dropped
        terms = [NodeSelectorTerm(tuple(r for r in term.expressions if r.key in labels)) for term in podset.affinity]
        if any(not term.expressions for term in terms):
            return True  # a term with nothing left to check matches any node of the flavor
        return affinity_matches(tuple(terms), "", labels)
    return True


def compatible(podset: PodSet, flavor: FlavorSpec, implied: bool = False) -> bool:
    """Could the pod set's pods go on the flavor's nodes at all (taints tolerated, selectors and affinity, a topology
    request met by a topology-aware flavor; ``implied``: the ClusterQueue's flavors are all topology-aware)?"""
    return _untolerated(podset, flavor) is None and node_matches(podset, flavor) and \
        not tas_match(podset, flavor, implied)


def _fits(cq: ClusterQueueSpec, tree: QuotaTree, fr: FlavorResource, val: int, previous: int,
          oracle: Oracle | None, fair: bool = False) -> tuple[Granular, int, str, PendingReason | None]:
    """Kueue's ``fitsResourceQuota`` for one (flavor, resource): mode, borrowing level, reason, and the reason's
    kind: more than the maximum capacity is ExceedsMaxQuota, any other shortfall WaitingForQuota. Under fair
    sharing a queue that reclaims within its cohort may preempt while borrowing (Kueue's
    ``canPreemptWhileBorrowing``)."""
    flavor, resource = fr
    capacity = tree.potential(cq.name, fr)
    if val > capacity:
        return Granular.NO_FIT, 0, (
            f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
            f"({format_amount(resource, previous)}) + current podset request "
            f"({format_amount(resource, val - previous)}) > maximum capacity ({format_amount(resource, capacity)})"), \
            PendingReason.EXCEEDS_MAX_QUOTA
    level, may_reclaim = tree.borrow_level(cq.name, fr, val)
    available = max(0, tree.available(cq.name, fr))
    if val <= available:
        return Granular.FIT, level, "", None
    reason = (f"insufficient unused quota for {resource} in flavor {flavor}, "
              f"{format_amount(resource, val - available)} more needed")
    waiting = PendingReason.WAITING_FOR_QUOTA
    if (tree.nominal(cq.name, fr) >= val or may_reclaim
            or cq.borrow_within_cohort is not PreemptionPolicy.NEVER
            or (fair and cq.reclaim_within_cohort is not PreemptionPolicy.NEVER)):
        if oracle is None:
            return Granular.PREEMPT, level, reason, waiting
        granular, after = oracle(fr, val)
        return granular, after if granular is not Granular.NO_CANDIDATES else level, reason, waiting
    return Granular.NO_FIT, level, reason, waiting


def _preferred(a: FlavorTry, b: FlavorTry, prefer_preemption: bool) -> bool:
    """Kueue's ``isPreferred``: is ``a`` strictly better than ``b``?"""
    if a.granular is Granular.NO_FIT:
        return False
    if b.granular is Granular.NO_FIT:
        return True
    if a.granular.viable != b.granular.viable:
        return a.granular.viable
    if prefer_preemption:
        if a.borrow != b.borrow:
            return a.borrow < b.borrow
        return a.granular > b.granular
    if a.granular != b.granular:
        return a.granular > b.granular
    return a.borrow < b.borrow


def _stops(attempt: FlavorTry, cq: ClusterQueueSpec) -> bool:
    if not attempt.granular.viable:
        return False
    if attempt.granular in (Granular.PREEMPT, Granular.RECLAIM) and not cq.fungibility.stop_when_preempting:
        return False
    return not (attempt.borrow > 0 and not cq.fungibility.stop_when_borrowing)


def _requests(podset: PodSet, cq: ClusterQueueSpec) -> dict[str, int]:
    requests = {r: v for r, v in podset.requests.items() if v > 0}
    if cq.group_of("pods") is not None:
        requests["pods"] = 1000
    return requests


def _refused(search: _Search, name: str, spec: FlavorSpec | None, podsets: Sequence[PodSet]) -> FlavorTry | None:
    """Why the flavor cannot take the pod sets whatever its quota (None where it could): each check asked of every
    pod set in turn, as Kueue's ``findFlavorForPodSets`` asks them of a pod set group."""
    no_match = PendingReason.NO_MATCHING_FLAVOR
    if spec is None:
        return FlavorTry(name, Granular.NO_FIT, 0, (f"flavor {name} not found",), no_fit=no_match)
    if search.has_tas:
        for podset in podsets:
            unmatched = tas_match(podset, spec, search.implied)
            if unmatched:
                return FlavorTry(name, Granular.NO_FIT, 0, (unmatched,), no_fit=no_match)
    if name in search.unavailable:
        return FlavorTry(name, Granular.NO_FIT, 0,
                         (f"flavor {name} cannot deliver nodes: {search.unavailable[name]}",),
                         no_fit=PendingReason.WAITING_FOR_QUOTA)
    for podset in podsets:
        taint = _untolerated(podset, spec)
        if taint is not None:
            return FlavorTry(name, Granular.NO_FIT, 0, (
                f"untolerated taint {{{taint.key} {taint.value} {taint.effect} <nil>}} in flavor {name}",),
                no_fit=no_match)
    if not all(node_matches(podset, spec) for podset in podsets):
        return FlavorTry(name, Granular.NO_FIT, 0, (f"flavor {name} doesn't match node affinity",), no_fit=no_match)
    return None


def _try(search: _Search, name: str, spec: FlavorSpec | None, podsets: Sequence[PodSet], wanted: list[str],
         amounts: Mapping[str, int]) -> FlavorTry:
    """One flavor for ``wanted`` of the pod sets (one, or a pod set group's), ``amounts`` their summed requests."""
    refused = _refused(search, name, spec, podsets)
    if refused is not None:
        return refused
    cq, tree, assigned, oracle, fair = search.cq, search.tree, search.assigned, search.oracle, search.fair
    granular, borrow, why, preempt = Granular.FIT, 0, [], []
    no_fit: PendingReason | None = None
    for resource in wanted:
        fr = (name, resource)
        previous = assigned.get(fr, 0)
        res_mode, res_borrow, reason, kind = _fits(cq, tree, fr, amounts[resource] + previous, previous, oracle,
                                                   fair)
        granular = min(granular, res_mode)
        borrow = max(borrow, res_borrow)
        if reason:
            why.append(reason)
            no_fit = most_severe(no_fit, kind)
        if res_mode.mode is Mode.PREEMPT:
            preempt.append(resource)
    return FlavorTry(name, granular, borrow, tuple(why), tuple(preempt), no_fit)


@dataclass(slots=True)
class _Search:
    """What the search of one workload's flavors works with; ``assigned`` grows as pod sets get flavors."""

    cq: ClusterQueueSpec
    tree: QuotaTree
    flavors: Mapping[str, FlavorSpec]
    oracle: Oracle | None
    unavailable: Mapping[str, str]
    assigned: dict[FlavorResource, int]
    has_tas: bool = False
    """Some flavor of the ClusterQueue is topology-aware."""
    implied: bool = False
    """Every flavor of the ClusterQueue is: a pod set that asks no topology is placed unconstrained."""
    fair: bool = False
    """Kueue's fair sharing is on."""
    delayed: frozenset[str] = frozenset()
    """The topology-aware flavors whose pod sets are placed only once a ProvisioningRequest check is Ready."""


def assign_flavors(
    workload: Workload, cq: ClusterQueueSpec, tree: QuotaTree, flavors: Mapping[str, FlavorSpec],
    oracle: Oracle | None = None, unavailable: Mapping[str, str] | None = None, topology: TopologyView | None = None,
    *, fair: bool = False, delayed: frozenset[str] = frozenset(),
) -> Assignment:
    """Choose a flavor for every resource group of every pod set of ``workload`` in ``cq`` (a variant's pod sets
    only among the flavors it may take); pod sets on topology-aware flavors are then placed in ``topology``, but
    those on the ``delayed`` flavors (a ProvisioningRequest check applies: their nodes come later); ``fair``:
    under Kueue's fair sharing."""
    has_tas = any(flavors[f].topology for g in cq.groups for f in g.flavors if f in flavors)
    search = _Search(cq, tree, flavors, oracle, unavailable or {}, {}, has_tas,
                     has_tas and tas_implied(cq, flavors), fair, delayed)
    done: dict[int, PodSetResult] = {}
    for members in _podset_groups(workload.podsets):
        podsets = [workload.podsets[i] for i in members]
        found = _assign_podsets(search, podsets, [workload.allowed_for(p.name) for p in podsets])
        done.update(zip(members, found, strict=True))
        if found[0].granular is Granular.NO_FIT:  # only a pod set (group) that found no flavor is NoFit
            return Assignment(tuple(done[i] for i in sorted(done)), complete=False)
    results = [done[i] for i in range(len(workload.podsets))]
    if has_tas and topology is not None:
        results = _place_topology(search, workload, results, topology)
    return Assignment(tuple(results))


def _podset_groups(podsets: Sequence[PodSet]) -> list[list[int]]:
    """The pod sets whose flavors are chosen together, by index, in the order each group first comes: those that
    name one group in their topology requests (Kueue's ``podSetGroupName``), each other pod set alone."""
    groups: dict[str | int, list[int]] = {}
    for i, podset in enumerate(podsets):
        name = podset.topology.group if podset.topology is not None else ""
        groups.setdefault(name or i, []).append(i)
    return list(groups.values())


def reusable(assignment: Assignment) -> bool:
    """Whether ``assignment`` fits on the first flavor tried for each resource group of each pod set, none placed on
    a topology: then all it read of the quota tree is whether each of those flavors fits, and at which borrowing
    level (:func:`fits_again`); the rest is the workload's shape, its allowed flavors and the configuration."""
    if assignment.granular is not Granular.FIT:
        return False
    for ps in assignment.podsets:
        if ps.topology is not None or ps.grouped or len(ps.tried) != len(set(ps.flavors.values())):
            return False  # (a group that tried more than the flavor it took)
        if any(attempt.granular is not Granular.FIT for attempt in ps.tried):
            return False
    return True


def fits_again(assignment: Assignment, cq: ClusterQueueSpec, tree: QuotaTree) -> bool:
    """Whether :func:`assign_flavors` would give a :func:`reusable` ``assignment`` again, for a workload of the same
    shape and allowed flavors in ``cq``, with no flavor unavailable, placed on no topology: each flavor it took still
    fits, at the borrowing level it fitted at (what each pod set asks of a flavor counts what the pod sets before it
    took, as :func:`_fits` is asked)."""
    assigned: dict[FlavorResource, int] = {}
    for ps in assignment.podsets:
        for attempt in ps.tried:
            level = 0
            for fr, amount in ps.usage.items():
                if fr[0] != attempt.flavor:
                    continue
                val = assigned.get(fr, 0) + amount
                if val > max(0, tree.available(cq.name, fr)):
                    return False
                level = max(level, tree.borrow_level(cq.name, fr, val)[0])
            if level != attempt.borrow:
                return False
        for fr, amount in ps.usage.items():
            assigned[fr] = assigned.get(fr, 0) + amount
    return True


def topology_request(podset: PodSet, implied: bool) -> TopologyRequest | None:
    """What a pod set asks of a topology-aware flavor: its own request, else (``implied``) unconstrained."""
    return podset.topology if podset.topology is not None else TopologyRequest(unconstrained=True) if implied \
        else None


def _place_topology(search: _Search, workload: Workload, results: list[PodSetResult],
                    view: TopologyView) -> list[PodSetResult]:
    """Kueue's topology phase of the flavor assigner: once every pod set has its flavors, those on a topology-aware
    flavor are placed, a pod set group's two together (:mod:`flexq.scheduler.tas_groups`) where the first of them
    comes. Where the quota fits and the placement does not, it could fit once others' pods are gone
    (Preempt: its flavor's resources need preemption, and the victims must free a placement, fair sharing on or
    off) or could never fit the flavor's nodes (NoFit,
    ``TopologyPlacementFailed``); where the quota needs preemption, only the second is asked."""
    out: dict[int, PodSetResult] = {}
    held: list[tuple[TopologyAssignment, Mapping[str, int]]] = []
    flavors = [_tas_flavor(search, result) for result in results]
    pairs = group_pairs(workload.podsets, lambda i: f.name if (f := flavors[i]) is not None else None)
    for i, (podset, result) in enumerate(zip(workload.podsets, results, strict=True)):
        request, flavor = topology_request(podset, search.implied), flavors[i]
        if i in out:
            continue
        if request is None or flavor is None:
            out[i] = result
            continue
        if flavor.name in search.delayed:  # Kueue's first pass under a ProvisioningRequest: placed once it is Ready
            out[i] = dataclasses.replace(result, delayed=True)
            continue
        if i in pairs:
            out.update(_place_group(view, held, flavor, workload, results, (i, pairs[i])))
            continue
        tolerations = (*podset.tolerations, *flavor.tolerations)
        placed: TopologyAssignment | str = "" if result.granular is not Granular.FIT else \
            place(view.plus(flavor.topology, held), flavor, podset, request, tolerations)
        if isinstance(placed, TopologyAssignment):
            held.append(holding(placed, podset))
            out[i] = dataclasses.replace(result, topology=placed)
            continue
        empty = place(view, flavor, podset, request, tolerations, empty=True)
        out[i] = _not_placed(result, placed, isinstance(empty, str), flavor)
    return [out[i] for i in range(len(results))]


def _place_group(view: TopologyView, held: list[tuple[TopologyAssignment, Mapping[str, int]]], flavor: FlavorSpec,
                 workload: Workload, results: list[PodSetResult],
                 pair: tuple[int, int]) -> dict[int, PodSetResult]:
    """A pod set group's two pod sets placed together, as the workers' request asks (Kueue places them only
    together: where they do not fit, neither does)."""
    first, second = (workload.podsets[i] for i in pair)
    fit = all(results[i].granular is Granular.FIT for i in pair)
    placed = place_pair(view.plus(flavor.topology, held), flavor, first, second) if fit else ""
    if not isinstance(placed, str):
        held.extend(holding(where, ps) for where, ps in zip(placed, (first, second), strict=True))
        return {i: dataclasses.replace(results[i], topology=where) for i, where in zip(pair, placed, strict=True)}
    empty = place_pair(view, flavor, first, second, empty=True)
    return {i: _not_placed(results[i], placed, isinstance(empty, str), flavor) for i in pair}


def _not_placed(result: PodSetResult, placed: str, never: bool, flavor: FlavorSpec) -> PodSetResult:
    """A pod set on a topology-aware flavor not placed: why (``placed``: Kueue's message, empty where its quota
    needs preemption first); ``never``: it would not fit the flavor's nodes were they empty."""
    reasons = (*result.reasons, placed) if placed else result.reasons  # Kueue tells the first placement's
    if never:
        return dataclasses.replace(result, granular=Granular.NO_FIT, reasons=reasons,
                                   no_fit=PendingReason.TOPOLOGY_PLACEMENT_FAILED)
    if placed:
        return dataclasses.replace(result, granular=Granular.NO_CANDIDATES, reasons=reasons,
                                   no_fit=PendingReason.WAITING_FOR_QUOTA, topology_blocked=True,
                                   preempt=frozenset(fr for fr in result.usage if fr[0] == flavor.name))
    return result


def _tas_flavor(search: _Search, result: PodSetResult) -> FlavorSpec | None:
    """The topology-aware flavor a pod set took (Kueue allows one per pod set)."""
    for name in dict.fromkeys(result.flavors.values()):
        spec = search.flavors.get(name)
        if spec is not None and spec.topology and spec.levels:
            return spec
    return None


def _groups(per_pod: Mapping[str, int], cq: ClusterQueueSpec) -> tuple[list[ResourceGroup], str | None]:
    """The resource groups the pod set's resources are in, in order, and the first resource in none (if any)."""
    groups: list[ResourceGroup] = []
    for resource in per_pod:
        group = cq.group_of(resource)
        if group is None:
            return groups, resource
        if group not in groups:
            groups.append(group)
    return groups, None


def _assign_podsets(search: _Search, podsets: Sequence[PodSet],
                    allowed: Sequence[frozenset[str] | None]) -> list[PodSetResult]:
    """One pod set's flavors, or a pod set group's (Kueue's ``groupedRequests``): each resource group takes one
    flavor for the group's summed requests, tried against every pod set of it; each pod set then keeps the flavors
    of the resources it asks for, and the group shares the flavors tried and the outcome."""
    per_pods = [_requests(podset, search.cq) for podset in podsets]
    amounts: dict[str, int] = {}
    for podset, per_pod in zip(podsets, per_pods, strict=True):
        for resource, value in per_pod.items():
            amounts[resource] = amounts.get(resource, 0) + podset.count * value
    groups, missing = _groups(amounts, search.cq)
    if missing is not None:
        return [_no_fit(podset, [], [f"resource {missing} unavailable in ClusterQueue"], None) for podset in podsets]
    chosen: dict[str, str] = {}
    tried: list[FlavorTry] = []
    reasons: list[str] = []
    granular, borrow = Granular.FIT, 0
    preempt: set[FlavorResource] = set()
    no_fit: PendingReason | None = None
    """The most severe, across groups, of each group's least severe reason (Kueue's resolveNoFitReason)."""
    for group in groups:
        wanted = [r for r in group.covered if r in amounts]
        best, attempts = _search_group(search, podsets, group, wanted, amounts, allowed)
        tried += attempts
        group_reasons = [reason for attempt in attempts for reason in attempt.reasons]
        no_fit = most_severe(no_fit, _least_severe(attempts))
        if best is None:
            return [_no_fit(podset, tried, group_reasons, no_fit) for podset in podsets]
        if best.granular is not Granular.FIT:
            reasons.extend(group_reasons)
        granular = min(granular, best.granular)
        borrow = max(borrow, best.borrow)
        preempt.update((best.flavor, r) for r in best.needs_preemption)
        for resource in wanted:
            chosen[resource] = best.flavor
            search.assigned[(best.flavor, resource)] = search.assigned.get((best.flavor, resource), 0) + \
                amounts[resource]
    results = []
    for podset, per_pod in zip(podsets, per_pods, strict=True):
        usage = {(chosen[r], r): podset.count * v for r, v in per_pod.items()}
        # a group's pod set that asks nothing (a leader with no requests) keeps the group's topology-aware flavors,
        # to be placed with the others (Kueue's resolvePodSetFlavors)
        mine = {r: chosen[r] for r in per_pod} if per_pod or len(podsets) == 1 else \
            {r: f for r, f in chosen.items() if (spec := search.flavors.get(f)) is not None and spec.topology}
        results.append(PodSetResult(podset.name, podset.count, mine, granular, borrow,
                                    usage, tuple(tried), tuple(reasons) if granular is not Granular.FIT else (),
                                    frozenset(fr for fr in preempt if fr in usage), grouped=len(podsets) > 1))
    return results


def _search_group(
    search: _Search, podsets: Sequence[PodSet], group: ResourceGroup, wanted: list[str], amounts: Mapping[str, int],
    allowed: Sequence[frozenset[str] | None],
) -> tuple[FlavorTry | None, list[FlavorTry]]:
    """Try the group's flavors in order: the best that fits in some way (None if none does), and those tried."""
    best: FlavorTry | None = None
    tried: list[FlavorTry] = []
    prefer_preemption = search.cq.fungibility.prefer_preemption_over_borrowing
    for name in group.flavors:
        if any(a is not None and name not in a for a in allowed):
            continue  # a variant's pod set takes its own flavor (or one that does not race)
        attempt = _try(search, name, search.flavors.get(name), podsets, wanted, amounts)
        tried.append(attempt)
        if best is None or _preferred(attempt, best, prefer_preemption):
            best = attempt if attempt.granular is not Granular.NO_FIT else best
        if _stops(attempt, search.cq):
            break
    return best, tried


def _least_severe(attempts: list[FlavorTry]) -> PendingReason | None:
    """The least severe reason of the flavors that did not fit (they were alternatives)."""
    least: PendingReason | None = None
    for attempt in attempts:
        if attempt.granular is Granular.NO_FIT and attempt.no_fit is not None and (
                least is None or attempt.no_fit.severity < least.severity):
            least = attempt.no_fit
    return least


def _no_fit(podset: PodSet, tried: list[FlavorTry], reasons: list[str], no_fit: PendingReason | None) -> PodSetResult:
    return PodSetResult(podset.name, podset.count, {}, Granular.NO_FIT, 0, {}, tuple(tried), tuple(reasons),
                        no_fit=no_fit or PendingReason.NO_MATCHING_FLAVOR)
