"""Kueue's admission cycle: at most one head per ClusterQueue, all nominated against the same snapshot, ordered
(not borrowing first, higher priority, earlier queue time), then admitted, preempted for, or requeued.

:class:`CycleRunner` runs cycles over the :class:`~flexq.scheduler.state.SchedulerState`, changing it through
:class:`~flexq.scheduler.transitions.Transitions` (and :class:`~flexq.scheduler.racing.Racing` for variants). What a
cycle tries in the quota tree (victims out, capacity kept for a preemptor) is
tried in one :meth:`~flexq.scheduler.quota.QuotaTree.trial`, undone when the cycle ends.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from flexq.scheduler.domains import TopologyView, holding
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.fair_preemption import search_for
from flexq.scheduler.fairshare import fair_order
from flexq.scheduler.flavorassigner import Assignment, assign_flavors, fits_again, reusable
from flexq.scheduler.holdings import Holdings
from flexq.scheduler.holdings import discount as shared_discount
from flexq.scheduler.model import (
    CheckState,
    ClusterQueueSpec,
    FlavorResource,
    Granular,
    Mode,
    PendingReason,
    PodSet,
    PreemptionPolicy,
    Workload,
)
from flexq.scheduler.partial import largest_fit, reducible
from flexq.scheduler.preemption import (
    CohortScan,
    PreemptionOracle,
    Search,
    Target,
    find_targets,
    fits_with_borrowing,
    nobody_locally,
    oracle_for,
)
from flexq.scheduler.quota import Node, Trial
from flexq.scheduler.racing import Racing
from flexq.scheduler.second_pass import needs_second_pass, place_delayed
from flexq.scheduler.second_pass import queue as queue_second_pass
from flexq.scheduler.slices import assign_slice, replaced_slice, slice_targets
from flexq.scheduler.state import SchedulerState, Stuck
from flexq.scheduler.tas import (
    Held,
    delayed_flavors,
    placed_empty,
    placed_without,
    reserving,
    topology_check,
    topology_fits,
    topology_view,
)
from flexq.scheduler.transitions import Transitions

__all__ = ["NAMESPACE_MISMATCH", "CycleRunner"]

_SHAPES_KEPT: Final = 10_000
"""At most so many pod sets' shapes are kept (workloads generated alike share theirs; others each have their own)."""

NAMESPACE_MISMATCH: Final = "workload namespace doesn't match ClusterQueue selector"
"""Kueue's message (``workload.ErrNamespaceMismatch``): the workload's namespace is not one its ClusterQueue selects."""


@dataclass(slots=True)
class _Cycle:
    """One cycle's state: its trial changes to the quota tree (victims out, capacity kept for preemptors),
    undone when the cycle ends."""

    trial: Trial
    removed: list[Workload] = field(default_factory=list)
    """The victims of preemptions issued this cycle, out of the tree until it ends."""
    victims: list[Workload] = field(default_factory=list)
    progress: bool = False
    reserved: dict[str, Held] = field(default_factory=dict)
    """By Topology: the placements preempting workloads keep until the cycle ends (Kueue adds a preempting
    workload's topology usage to the cycle's snapshot, as it does its quota)."""


class CycleRunner:
    """Kueue's admission cycle, run over the scheduler's state."""

    def __init__(self, state: SchedulerState, holdings: Holdings, racing: Racing, transitions: Transitions) -> None:
        self.state = state
        self.holdings = holdings
        self.racing = racing
        self.transitions = transitions
        self._view: TopologyView | None = None
        """The nodes this cycle places topology-aware pod sets on (None: no topology-aware flavor)."""
        self._scan: CohortScan | None = None
        """The cohorts' preemption candidates, while the heads of a cycle are nominated."""
        self._shapes: dict[int, tuple[tuple[PodSet, ...], tuple[object, ...]]] = {}
        """id of pod sets -> the pod sets (kept, so that the id is theirs) and their :meth:`Workload.shape`."""

    def __deepcopy__(self, memo: dict[int, object]) -> CycleRunner:
        """A copy acting on the copied state; the shapes known (values, each with the pod sets it is of) are shared,
        not copied over again."""
        other = object.__new__(CycleRunner)
        memo[id(self)] = other
        for name, value in vars(self).items():
            setattr(other, name, dict(value) if name == "_shapes" else copy.deepcopy(value, memo))
        return other

    def schedule(self, now: float, max_cycles: int = 1_000_000) -> list[Event]:
        """Run cycles at ``now`` until one changes nothing; return what happened."""
        state = self.state
        self._expire_unavailable(now)
        events, state.deferred = state.deferred, []
        events += self.transitions.hold_stopped(now)
        events += self.transitions.requeue_due(now)
        events += self.racing.settle_admitted(self._second_passes(now), now)
        state.queues.fair_step(events, now, state.workloads, state.holding)
        state.cut_short = False
        for _ in range(max_cycles):
            cycle_events, progress = self.cycle(now)
            settled = self.racing.settle_admitted(cycle_events, now)
            state.queues.fair_step(settled[len(cycle_events):], now, state.workloads, state.holding)
            events += settled
            if not progress:
                break
        else:
            state.cut_short = True
        return events

    def _second_passes(self, now: float) -> list[Event]:
        """Kueue's second pass for delayed topology requests due by ``now``, earliest first: placed on the nodes
        now there, the workload is admitted; not placed, it keeps its quota and is tried again after a longer
        backoff (:mod:`flexq.scheduler.second_pass`)."""
        state = self.state
        events: list[Event] = []
        for _, key in sorted((at, key) for key, (at, _) in state.second_pass.items() if at <= now):
            _, iteration = state.second_pass.pop(key)
            wl = state.workloads.get(key)
            if wl is None or not needs_second_pass(wl):
                continue
            placed = place_delayed(state, wl, now)
            if not isinstance(placed, str):
                events += self.transitions.admit_placed(wl, placed, now)
                continue
            wl.pending_reason = placed
            queue_second_pass(state, key, now, iteration + 1)
            events.append(Event(now, EventKind.SECOND_PASS_FAILED, key, wl.cluster_queue, placed))
        return events

    def _expire_unavailable(self, now: float) -> None:
        state = self.state
        gone = [f for f, (until, _) in state.unavailable.items() if until <= now]
        for flavor in gone:
            del state.unavailable[flavor]
        if gone:
            state.failed.clear()
            state.fitted.clear()
            state.queues.wake(list(state.config.cluster_queues), state.workloads)

    def cycle(self, now: float) -> tuple[list[Event], bool]:
        """One Kueue scheduling cycle. Returns its events and whether it admitted or preempted anything."""
        state = self.state
        aside = state.set_aside
        self._view = topology_view(state, now)
        state.queues.fair_step((), now, state.workloads, state.holding)  # the usage sampled by now orders the heads
        heads, events = self._heads(now)
        cq_of = state.config.cluster_queues
        nominated: list[tuple[Workload, Assignment, list[Target]]] = []
        self._scan = CohortScan()
        for wl in heads:
            if wl.checks and any(s in (CheckState.RETRY, CheckState.REJECTED) for s in wl.checks.values()):
                events += self.transitions.inadmissible(wl, "The workload has failed admission checks", now,
                                                        PendingReason.PENDING_EVALUATION)
                continue
            if not cq_of[wl.cluster_queue].admits_namespace(state.config.namespace_labels(wl.namespace)):
                # Kueue's nominate: a Misconfigured workload, requeued as inadmissible even under StrictFIFO.
                events += self.transitions.inadmissible(wl, NAMESPACE_MISMATCH, now, PendingReason.MISCONFIGURED,
                                                        blocks=False)
                continue
            assignment, oracle = self._assign(wl)
            targets: list[Target] = []
            if assignment.mode is Mode.PREEMPT and (assignment.granular is not Granular.NO_CANDIDATES
                                                    or assignment.topology_blocked):
                # NO_CANDIDATES: the preemption oracle already found nobody to preempt, in this same state (it is not
                # asked about topology: a placement only preemption frees is searched for here).
                targets = self._targets(wl, assignment, oracle)
            if assignment.mode is not Mode.FIT and not targets and reducible(wl.podsets) and not wl.replaces:
                partial = self._assign_partial(wl)
                if partial is not None:
                    assignment, targets = partial
                state.last_assignment[wl.key] = assignment
            if targets and self._view is not None and assignment.mode is Mode.PREEMPT:
                assignment = placed_without(state, now, wl, assignment, targets)
            nominated.append((wl, assignment, targets))
        self._scan = None
        if len(nominated) > 1:
            nominated.sort(key=lambda e: (e[1].borrow, -e[0].priority, e[0].queue_time, e[0].uid or e[0].key))
        with state.tree.trial() as trial:
            cycle = _Cycle(trial)
            order = nominated if state.config.fair_sharing is None else fair_order(
                state.tree, nominated, lambda e: e[0], lambda e: e[1].usage())
            for wl, assignment, targets in order:
                events += self._process(wl, assignment, targets, cycle, now)
        if state.instant_eviction:
            for victim in cycle.victims:
                events += self.transitions.complete_eviction(victim.key, now)
        state.queues.fair_step(events, now, state.workloads, state.holding)
        return events, cycle.progress or state.set_aside != aside

    def _process(self, wl: Workload, assignment: Assignment, targets: list[Target], cycle: _Cycle,
                 now: float, recomputed: bool = False) -> list[Event]:
        state = self.state
        if assignment.mode is Mode.NO_FIT:
            return self.transitions.inadmissible(wl, assignment.message(), now, assignment.no_fit)
        cq = state.config.cluster_queues[wl.cluster_queue]
        usage = assignment.usage()
        if assignment.mode is Mode.PREEMPT and not targets:
            return self._preempts_nobody(wl, assignment, cq, usage, cycle, now, recomputed)
        old = replaced_slice(state.workloads, wl)
        if old is not None and assignment.mode is Mode.FIT:
            return self._replace_slice(wl, old, assignment, cycle, now)
        discount = shared_discount(usage, self.holdings.shared(wl))
        if discount:
            usage = {fr: v - discount.get(fr, 0) for fr, v in usage.items()}
        if targets and {v.key for v in cycle.removed}.intersection(t.workload.key for t in targets):
            return self.transitions.skip(wl, "Workload has overlapping preemption targets with another workload",
                                         now, PendingReason.WAITING_FOR_QUOTA)
        own = [t.workload for t in targets]
        mark = cycle.trial.mark()
        for victim in own:
            self._remove_for_cycle(victim, cycle)
        # A growing slice preempts for what it adds: the slice it replaces is out of the tree for the check.
        replaced = old.admission.usage() if old is not None and old.admission is not None else {}
        if replaced:
            with state.tree.without([(cq.name, replaced)]):
                fits = fits_with_borrowing(state.tree, cq.name, usage)
            usage = {fr: v - replaced.get(fr, 0) for fr, v in usage.items()}
        else:
            fits = fits_with_borrowing(state.tree, cq.name, usage)
        placed = fits and self._tas_fits(wl, assignment, cycle)
        if not placed:
            cycle.trial.undo(mark)
            del cycle.removed[len(cycle.removed) - len(own):]
            if fits and not recomputed and self._recomputes(wl):
                # Kueue's TASRecomputeAssignmentWithinSchedulingCycle: the quota still fits, the placement was taken
                again = self._recompute(wl, assignment, cycle)
                return self._process(wl, *again, cycle, now, recomputed=True)
            return self.transitions.skip(wl, "Workload no longer fits after processing another workload", now,
                                         PendingReason.WAITING_FOR_QUOTA)
        if assignment.mode is Mode.FIT:
            cycle.progress = True
            return self.transitions.reserve(wl, assignment, now, discount)
        cycle.trial.add(cq.name, usage)
        return self._preempting(wl, assignment, targets, cycle, now)

    def _preempts_nobody(self, wl: Workload, assignment: Assignment, cq: ClusterQueueSpec,
                         usage: dict[FlavorResource, int], cycle: _Cycle, now: float,
                         recomputed: bool) -> list[Event]:
        """A head that needs preemption and found nobody to preempt: assigned again where its placement (not its
        quota) was taken this cycle; else it waits, keeping its quota and its placement for the cycle where its
        ClusterQueue cannot always reclaim (Kueue's reservation for an unreclaimable preemptor)."""
        state = self.state
        if self._view is not None and assignment.topology_blocked:
            if not recomputed and self._recomputes(wl) and fits_with_borrowing(state.tree, cq.name, usage) \
                    and not self._tas_fits(wl, placed_empty(state, self._view, wl, assignment), cycle):
                again = self._recompute(wl, assignment, cycle)
                return self._process(wl, *again, cycle, now, recomputed=True)
        if cq.reclaim_within_cohort is not PreemptionPolicy.ANY:
            self._reserve_capacity(cq, usage, assignment.borrow > 0, cycle)
            if self._view is not None:
                self._reserve_placement(wl, placed_empty(state, self._view, wl, assignment), cycle)
        gated = ". It preempts nobody: another variant of its workload holds quota or is preempting" \
            if wl.key in state.gated else ""
        state.gated.discard(wl.key)
        return self.transitions.inadmissible(wl, assignment.message() + gated, now, PendingReason.WAITING_FOR_QUOTA)

    def _preempting(self, wl: Workload, assignment: Assignment, targets: list[Target], cycle: _Cycle,
                    now: float) -> list[Event]:
        """A head whose victims free what it needs (its quota taken for the cycle): it keeps its placement for the
        cycle and its victims are preempted; it waits for them."""
        state = self.state
        self._reserve_placement(wl, assignment, cycle)
        events: list[Event] = []
        state.last_targets[wl.key] = list(targets)
        new = [t for t in targets if not t.workload.evicting]
        for target in new:
            events += self.transitions.preempt(target, wl, now)
            cycle.victims.append(target.workload)
        if new:
            cycle.progress = True
        message = f"{assignment.message()}. Pending the preemption of {len(targets)} workload(s)"
        if self.transitions.note_pending(wl, message, PendingReason.WAITING_FOR_PREEMPTED_WORKLOADS):
            events.append(Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, message))
        return events

    def _tas_fits(self, wl: Workload, assignment: Assignment, cycle: _Cycle) -> bool:
        """Whether the places ``assignment`` gives ``wl``'s topology-aware pod sets are still free: what workloads
        admitted this cycle hold counts, and what preempting ones keep; the cycle's victims are gone (Kueue's
        ``fits`` with the preempted workloads' removal simulated)."""
        view = self._view
        if view is None:
            return True
        if cycle.removed or cycle.reserved:
            without = topology_view(self.state, view.now, frozenset(v.key for v in cycle.removed))
            assert without is not None
            view = reserving(without, cycle.reserved)
        return topology_fits(self.state, view, wl, assignment)

    def _reserve_placement(self, wl: Workload, assignment: Assignment, cycle: _Cycle) -> None:
        """A preempting workload keeps the places its topology-aware pod sets will take, this cycle."""
        flavors = self.state.config.flavors
        podsets = {p.name: p for p in wl.podsets}
        for result in assignment.podsets:
            flavor = next((flavors[f] for f in result.flavors.values() if f in flavors and flavors[f].topology), None)
            if result.topology is not None and flavor is not None:
                cycle.reserved.setdefault(flavor.topology, []).append(holding(result.topology, podsets[result.name]))

    def _recomputes(self, wl: Workload) -> bool:
        """Whether ``wl``'s assignment is computed again when its placement is taken during the cycle (Kueue's
        ``TASRecomputeAssignmentWithinSchedulingCycle``); a variant sharing another's quota, or a growing slice,
        is not."""
        state = self.state
        return state.config.recompute_tas and self._view is not None and \
            replaced_slice(state.workloads, wl) is None and not self.holdings.shared(wl)

    def _recompute(self, wl: Workload, nominated: Assignment, cycle: _Cycle) -> tuple[Assignment, list[Target]]:
        """``wl`` assigned again against what the cycle took so far, on the flavors it was nominated on (Kueue's
        nomination mapping: the quota checked for the cycle's earlier heads stays right): the workloads admitted and
        the placements kept count; the cycle's victims count too, as they do in Kueue's snapshot, until the check."""
        state = self.state
        cq = state.config.cluster_queues[wl.cluster_queue]
        assert self._view is not None
        everywhere = frozenset(f for g in cq.groups for f in g.flavors)
        sticky = dataclasses.replace(wl, allowed=tuple(
            (ps.name, frozenset(result.flavors.values()) or (wl.allowed_for(ps.name) or everywhere))
            for ps, result in zip(wl.podsets, nominated.podsets, strict=True)))
        view = reserving(self._view, cycle.reserved)
        fair = state.config.fair_sharing
        with Trial(state.tree) as back:
            for victim in cycle.removed:
                assert victim.admission is not None
                back.add(victim.cluster_queue, victim.admission.usage())
            oracle = oracle_for(sticky, cq, state.tree, state.holding, usage=state.queues.victim_usage(),
                                search=search_for(fair))
            assignment = assign_flavors(sticky, cq, state.tree, state.config.flavors, oracle, self._unavailable(),
                                        view, fair=fair is not None, delayed=delayed_flavors(state, cq))
            state.last_assignment[wl.key] = assignment
            targets: list[Target] = []
            if assignment.mode is Mode.PREEMPT and (assignment.granular is not Granular.NO_CANDIDATES
                                                    or assignment.topology_blocked):
                targets = self._targets(sticky, assignment, oracle, cycle.reserved)
            if targets:
                assignment = placed_without(state, view.now, sticky, assignment, targets, cycle.reserved)
        return assignment, targets

    def _remove_for_cycle(self, victim: Workload, cycle: _Cycle) -> None:
        assert victim.admission is not None
        cycle.trial.remove(victim.cluster_queue, victim.admission.usage())
        cycle.removed.append(victim)

    def _replace_slice(self, wl: Workload, old: Workload, assignment: Assignment, cycle: _Cycle,
                       now: float) -> list[Event]:
        """Admit slice ``wl`` in place of ``old``: what it adds must fit; ``old`` is finished in the same step."""
        state = self.state
        assert old.admission is not None
        with state.tree.without([(old.cluster_queue, old.admission.usage())]):
            fits = all(v <= state.tree.available(wl.cluster_queue, fr) for fr, v in assignment.usage().items())
        if not fits:
            return self.transitions.skip(wl, "Workload no longer fits after processing another workload", now,
                                         PendingReason.WAITING_FOR_QUOTA)
        cycle.progress = True
        message = (f"Removed to accommodate a workload (UID: {wl.uid or wl.key}) due to workload slice aggregation")
        finished = self.transitions.finish_replaced(old, wl, now, message)
        return finished + self.transitions.reserve(wl, assignment, now)

    def _reserve_capacity(self, cq: ClusterQueueSpec, usage: Mapping[FlavorResource, int], borrowing: bool,
                          cycle: _Cycle) -> None:
        """A workload waiting for preemption keeps other heads off the capacity it needs, this cycle."""
        state = self.state
        reserved: dict[FlavorResource, int] = {}
        for fr, req in usage.items():
            nominal, used = state.tree.nominal(cq.name, fr), state.tree.usage(cq.name, fr)
            if borrowing:
                limit = state.tree.queues[cq.name].borrowing_limit(fr)
                amount = req if limit is None else min(req, nominal + limit - used)
            else:
                amount = max(0, min(req, nominal - used))
            if amount > 0:
                reserved[fr] = amount
        if reserved:
            cycle.trial.add(cq.name, reserved)

    def _heads(self, now: float) -> tuple[list[Workload], list[Event]]:
        state = self.state
        heads: list[Workload] = []
        events: list[Event] = []
        for name in state.queues.queues():
            cq = state.config.cluster_queues.get(name)
            if cq is None or state.queues.blocked(name):
                continue
            wl = state.queues.head(name, state.workloads)
            if wl is None:
                continue
            if not cq.active:
                # Kueue's workload controller says so of every pending workload of an inactive (or stopped) queue:
                # each steps aside in turn until the queue is active again.
                events += self.transitions.inadmissible(wl, f"ClusterQueue {name} is inactive", now,
                                                        PendingReason.SUSPENDED, blocks=False)
                continue
            if state.config.stopped_queues and (wl.namespace, wl.queue) in state.config.stopped_queues:
                # Kueue's workload controller: QuotaReserved=False, Suspended; the LocalQueue holds it back, its
                # ClusterQueue goes on with the others.
                events += self.transitions.inadmissible(wl, f"LocalQueue {wl.queue} is stopped", now,
                                                        PendingReason.SUSPENDED, blocks=False)
                continue
            heads.append(wl)
        return heads, events

    def _assign(self, wl: Workload) -> tuple[Assignment, PreemptionOracle | None]:
        """Nominate ``wl``: its assignment, and the preemption oracle that was asked (which knows the victims it
        found). A workload shaped like one that just found no way in, in a quota tree that has not changed since,
        gets the same answer without the search (Kueue's equivalence classes)."""
        state = self.state
        cq = state.config.cluster_queues[wl.cluster_queue]
        old = replaced_slice(state.workloads, wl)
        fair = state.config.fair_sharing
        if old is not None:
            assignment = assign_slice(wl, old, cq, state.tree, state.config.flavors, state.holding, search_for(fair),
                                      state.queues.victim_usage(), fair=fair is not None)
            state.last_assignment[wl.key] = assignment
            return assignment, None
        shared = self.holdings.shared(wl)
        if shared:
            # What a sibling variant already holds for the pod sets they share is this variant's too; with it set
            # aside the tree is not the nomination phase's: its candidates are collected anew.
            oracle = oracle_for(wl, cq, state.tree, state.holding, usage=state.queues.victim_usage(),
                                search=search_for(fair))
            with state.tree.without([(cq.name, shared)]):
                assignment = assign_flavors(wl, cq, state.tree, state.config.flavors, oracle, self._unavailable(),
                                            self._view, fair=fair is not None, delayed=delayed_flavors(state, cq))
            state.last_assignment[wl.key] = assignment
            return assignment, oracle
        shape = self._shape(wl, cq)
        version = state.tree.root(cq.name).version
        cached = state.failed.get(shape)
        if cached is not None and (cached[0] == version or self._still_stuck(wl, cq, cached[2])):
            if cached[0] != version:
                state.failed[shape] = (version, cached[1], cached[2])
            state.last_assignment[wl.key] = cached[1]
            return cached[1], None
        # Where pod sets are placed on nodes (or a flavor is unavailable), the answer also depends on that: it is not
        # kept.
        keep = self._view is None and not state.unavailable
        fitted = state.fitted.get((cq.name, wl.allowed, shape[-1])) if keep else None
        if fitted is not None and fits_again(fitted, cq, state.tree):
            state.last_assignment[wl.key] = fitted
            return fitted, None
        oracle = oracle_for(wl, cq, state.tree, state.holding, usage=state.queues.victim_usage(),
                            search=self._search())
        assignment = assign_flavors(wl, cq, state.tree, state.config.flavors, oracle, self._unavailable(), self._view,
                                    fair=fair is not None, delayed=delayed_flavors(state, cq))
        state.last_assignment[wl.key] = assignment
        if assignment.granular in (Granular.NO_FIT, Granular.NO_CANDIDATES) and self._view is None:
            stuck = self._stuck(cq, oracle.asked) if keep and oracle.asked is not None else None
            state.failed[shape] = (version, assignment, stuck)
        elif keep and reusable(assignment):
            if len(state.fitted) >= _SHAPES_KEPT:
                state.fitted.clear()
            state.fitted[(cq.name, wl.allowed, shape[-1])] = assignment
        return assignment, oracle

    def _stuck(self, cq: ClusterQueueSpec, asked: list[tuple[FlavorResource, int]]) -> Stuck:
        """What an assignment of ``cq``'s that found no way in read, where each preemption question it ``asked`` was
        answered from the queue alone: all else it read of the tree was the usage of the queue and of its ancestors
        (what :func:`~flexq.scheduler.flavorassigner.assign_flavors` asks of each flavor: whether it fits, and at
        which borrowing level)."""
        usages: list[dict[FlavorResource, int]] = []
        node: Node | None = self.state.tree.queues[cq.name]
        while node is not None:
            usages.append(dict(node.usage))
            node = node.parent
        return tuple(usages), tuple(asked)

    def _still_stuck(self, wl: Workload, cq: ClusterQueueSpec, stuck: Stuck | None) -> bool:
        """Whether a failed assignment kept with ``stuck`` (see :meth:`_stuck`) is what ``wl`` would get now: the
        usage along its queue's path is as it was, and each preemption question is still answered from the queue
        alone (whose own workloads may have changed)."""
        if stuck is None:
            return False
        state = self.state
        usages, asked = stuck
        node: Node | None = state.tree.queues[cq.name]
        for usage in usages:
            assert node is not None
            if node.usage != usage:
                return False
            node = node.parent
        return all(nobody_locally(wl, cq, state.tree, state.holding, {fr}, {fr: val}) for fr, val in asked)

    def _assign_partial(self, wl: Workload) -> tuple[Assignment, list[Target]] | None:
        """Partial admission (:mod:`flexq.scheduler.partial`): ``wl`` with the most pods, down to its pod sets'
        minimums, that fit or fit by preempting someone; None where even the minimums do not."""

        def fits(counts: list[int]) -> tuple[Assignment, list[Target]] | None:
            fewer = dataclasses.replace(wl, podsets=tuple(
                dataclasses.replace(ps, count=count) for ps, count in zip(wl.podsets, counts, strict=True)))
            assignment, oracle = self._assign(fewer)
            if assignment.mode is Mode.FIT:
                return assignment, []
            if assignment.mode is Mode.PREEMPT and assignment.granular is not Granular.NO_CANDIDATES:
                targets = self._targets(fewer, assignment, oracle)
                if targets:
                    return assignment, targets
            return None

        return largest_fit(wl.podsets, fits)

    def _search(self) -> Search:
        """How victims are searched for during the nomination phase: with its cohorts' candidates, collected once."""
        search = search_for(self.state.config.fair_sharing)
        if search is find_targets and self._scan is not None:
            return functools.partial(find_targets, scan=self._scan)
        return search

    def _unavailable(self) -> dict[str, str]:
        return {f: why for f, (_, why) in self.state.unavailable.items()}

    def _shape(self, wl: Workload, cq: ClusterQueueSpec) -> tuple[object, ...]:
        newer = wl.queue_time if cq.within_cluster_queue is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY else None
        # Pod sets are values (frozen, never changed in place): workloads that share them share their shape.
        podsets = wl.podsets
        known = self._shapes.get(id(podsets))
        if known is None or known[0] is not podsets:
            if len(self._shapes) >= _SHAPES_KEPT:
                self._shapes.clear()
            known = self._shapes[id(podsets)] = (podsets, wl.shape())
        return (cq.name, wl.priority, newer, wl.allowed, known[1])

    def _targets(self, wl: Workload, assignment: Assignment, oracle: PreemptionOracle | None,
                 reserved: Mapping[str, Held] | None = None) -> list[Target]:
        """The victims of the nominated ``wl``: those its preemption oracle found, when it was asked the same
        question in the same state, else searched for; where its pod sets are placed on a topology (fair
        sharing on or off), searched for so that they free a placement too."""
        state = self.state
        cq = state.config.cluster_queues[wl.cluster_queue]
        old = replaced_slice(state.workloads, wl)
        if old is not None:
            return slice_targets(wl, old, cq, state.tree, state.holding, assignment,
                                 search_for(state.config.fair_sharing), state.queues.victim_usage())
        needed, requests = assignment.preempt_resources(), assignment.usage()
        placed = topology_check(state, self._view.now, wl, assignment, reserved) if self._view is not None else None
        targets = oracle.found(needed, requests) if oracle is not None and placed is None else None
        if targets is None:
            targets = self._search()(wl, cq, state.tree, state.holding, needed, requests, None,
                                     state.queues.victim_usage(), topology=placed)
        if targets and not self.racing.may_preempt(wl):
            state.gated.add(wl.key)  # another variant of its workload holds quota or preempts
            return []
        return targets
