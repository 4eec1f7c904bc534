"""The scheduler: Kueue's admission cycle over an in-memory cache, for any clock.

Inputs arrive as method calls (configuration, workloads created or deleted, finished, admission
check states, evictions completed) with the time passed in; every decision is returned as
:class:`Event` values. Nothing here reads a clock, a random source or the outside world.

:meth:`Scheduler.cycle` is one Kueue cycle: at most one head per ClusterQueue, all nominated against
the same snapshot, ordered (not borrowing first, higher priority, earlier queue time), then admitted,
preempted for, or requeued. :meth:`Scheduler.schedule` runs cycles until one changes nothing, so that,
unlike Kueue (one head per ClusterQueue per cycle, then wait for the next event), everything that can
be admitted at that moment is admitted, in the order Kueue's successive cycles would admit it.

A workload whose ClusterQueue races its flavors (Kueue's Concurrent Admission, or flexq's own policy) is
queued as one variant per flavor instead (:mod:`flexq.scheduler.racing`): the variant that wins gives the
workload its admission.

Lifecycle of a workload: Pending -> QuotaReserved -> Admitted (when every admission check that
applies is Ready) -> Finished. Preemption marks victims *evicting*: they keep their quota until the
driver reports that they stopped (:meth:`Scheduler.complete_eviction`), or at once with
``instant_eviction``. A check's Retry evicts and requeues; Rejected deactivates.

The scheduler is a record and parts that act on it, each a module, each using only those below it:
:mod:`flexq.scheduler.state` (what it holds), :mod:`flexq.scheduler.holdings` (quota held and released),
:mod:`flexq.scheduler.racing` (concurrent admission), :mod:`flexq.scheduler.transitions` (state changes),
:mod:`flexq.scheduler.cycle` (the cycle), and this one, which owns them: the inputs, and the answers others read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from flexq.scheduler.cycle import CycleRunner
from flexq.scheduler.domains import TopologyNode
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.fair_usage import UsageLedger
from flexq.scheduler.fairshare import share_of
from flexq.scheduler.flavorassigner import Assignment
from flexq.scheduler.holdings import Holdings
from flexq.scheduler.model import (
    CheckState,
    FlavorResource,
    PendingReason,
    PodSet,
    PodSetUpdate,
    Workload,
    WorkloadState,
)
from flexq.scheduler.phrases import Text
from flexq.scheduler.preemption import Target
from flexq.scheduler.queue_config import Config
from flexq.scheduler.race import VariantPlan
from flexq.scheduler.racing import Racing
from flexq.scheduler.second_pass import needs_second_pass
from flexq.scheduler.second_pass import queue as queue_second_pass
from flexq.scheduler.slices import shrunk
from flexq.scheduler.state import MigrationCheck, SchedulerState
from flexq.scheduler.tas_replace import names_node, replacement
from flexq.scheduler.transitions import Transitions

__all__ = ["Config", "Scheduler"]


class Scheduler:
    """The face of the scheduler: its inputs, its answers, and its state's parts, owned here."""

    def __init__(self, config: Config | None = None, *, instant_eviction: bool = False) -> None:
        config = config or Config({}, {}, {})
        self._state = state = SchedulerState(config, SchedulerState.tree_for(config), instant_eviction,
                                             stops_due=_any_stopped(config))
        self._holdings = Holdings(state)
        self._racing = Racing(state, self._holdings)
        self._transitions = Transitions(state, self._holdings, self._racing)
        self._cycles = CycleRunner(state, self._holdings, self._racing, self._transitions)

    # --- the state others read (and the two settings a capacity driver makes) ---

    @property
    def config(self) -> Config:
        """The queue configuration (replaced by :meth:`configure`)."""
        return self._state.config

    @property
    def instant_eviction(self) -> bool:
        return self._state.instant_eviction

    @property
    def holding(self) -> Mapping[str, Mapping[str, Workload]]:
        """The workloads holding quota, by ClusterQueue."""
        return self._state.holding

    @property
    def last_assignment(self) -> Mapping[str, Assignment]:
        """The flavor assignment last found for each workload nominated."""
        return self._state.last_assignment

    @property
    def last_targets(self) -> Mapping[str, list[Target]]:
        """The preemption targets last chosen for each workload (issued, or already being evicted)."""
        return self._state.last_targets

    @property
    def unavailable(self) -> Mapping[str, tuple[float, str]]:
        """Flavors that could not deliver nodes: flavor -> (until, why) (:meth:`mark_unavailable`)."""
        return self._state.unavailable

    @property
    def variants(self) -> Mapping[str, list[str]]:
        """Racing workloads: the parent's key -> its variants' keys, most preferred first."""
        return self._state.variants

    @property
    def cut_short(self) -> bool:
        """The last :meth:`schedule` ran its ``max_cycles`` and the last of them still decided something."""
        return self._state.cut_short

    @property
    def start_decides(self) -> bool:
        """Set by a capacity driver: a variant wins when its pods start (:meth:`settle`), not when admitted."""
        return self._state.start_decides

    @start_decides.setter
    def start_decides(self, value: bool) -> None:
        self._state.start_decides = value

    @property
    def migration_check(self) -> MigrationCheck | None:
        """Beyond Kueue: asked before a running workload migrates to a variant's flavor (parent, variant, now); a
        reason refuses it (the variant is withdrawn)."""
        return self._state.migration_check

    @migration_check.setter
    def migration_check(self, check: MigrationCheck | None) -> None:
        self._state.migration_check = check

    @property
    def nodes(self) -> Callable[[], Iterable[TopologyNode]] | None:
        """Set by a capacity driver: the cluster's nodes, which topology-aware flavors place pod sets on (None: no
        nodes are known, and a topology-aware flavor places nothing)."""
        return self._state.nodes

    @nodes.setter
    def nodes(self, source: Callable[[], Iterable[TopologyNode]] | None) -> None:
        self._state.nodes = source

    def nodes_changed(self) -> None:
        """Nodes came, went or became ready: workloads set aside that a topology-aware flavor could place look again
        (nothing happens where no flavor is topology-aware)."""
        state = self._state
        if any(f.topology for f in state.config.flavors.values()):
            state.queues.wake(list(state.config.cluster_queues), state.workloads)

    # --- what the scheduler holds, for its drivers (the live controller, the simulator, the capacity driver) ---

    def workload(self, key: str) -> Workload | None:
        """The workload ``key`` (None when the scheduler does not hold it)."""
        return self._state.workloads.get(key)

    def held(self, key: str) -> Workload:
        """The workload ``key``, which the scheduler holds (KeyError otherwise)."""
        return self._state.workloads[key]

    def knows(self, key: str) -> bool:
        return key in self._state.workloads

    def workloads(self) -> list[Workload]:
        """Every workload held, in the order they were added."""
        return list(self._state.workloads.values())

    def workload_keys(self) -> list[str]:
        return list(self._state.workloads)

    def waiting(self, wl: Workload) -> bool:
        """A pending workload in its queue's line (not set aside as inadmissible)."""
        state = self._state
        return state.queues.queued(wl) and not state.queues.aside(wl)

    def queued(self, wl: Workload) -> bool:
        """A pending workload in its queue's line, set aside as inadmissible or not (not racing, not waiting out a
        retry delay, not missing its ClusterQueue)."""
        return self._state.queues.queued(wl)

    def aside(self, wl: Workload) -> bool:
        """A pending workload set aside as inadmissible, until something changes in its cohort tree."""
        return self._state.queues.aside(wl)

    def in_line(self, cq: str) -> list[Workload] | None:
        """The workloads waiting in ClusterQueue ``cq`` for quota, in the order it would try them (those set aside as
        inadmissible included, in their place); None where no such ClusterQueue is configured. Kueue's visibility
        API shows this line (``pendingworkloads``)."""
        state = self._state
        if cq not in state.config.cluster_queues:
            return None
        return state.queues.in_line(cq, state.workloads)

    def has_cluster_queue(self, name: str) -> bool:
        """The ClusterQueue is in the quota tree (configured and known)."""
        return name in self._state.tree.queues

    def cluster_queue_names(self) -> list[str]:
        """The ClusterQueues in the quota tree, by name."""
        return sorted(self._state.tree.queues)

    def tree_usage(self) -> dict[str, dict[FlavorResource, int]]:
        """What every ClusterQueue and cohort of the quota tree holds, by flavor and resource (amounts above 0)."""
        tree = self._state.tree
        return {name: {fr: v for fr, v in node.usage.items() if v}
                for name, node in [*tree.queues.items(), *tree.cohorts.items()]}

    def usage(self, cq: str, fr: FlavorResource) -> int:
        """What the ClusterQueue's admitted workloads hold of ``fr`` (0 for a queue not in the tree)."""
        state = self._state
        return state.tree.usage(cq, fr) if cq in state.tree.queues else 0

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        state = self._state
        return state.tree.nominal(cq, fr) if cq in state.tree.queues else 0

    def queue_usage(self, cq: str) -> dict[FlavorResource, int]:
        """What the ClusterQueue's admitted workloads hold, by flavor and resource."""
        state = self._state
        return dict(state.tree.queues[cq].usage) if cq in state.tree.queues else {}

    def weighted_shares(self) -> tuple[dict[str, float], dict[str, float]] | None:
        """Every ClusterQueue's and every cohort's fair-sharing weighted share (Kueue's ``PreciseWeightedShare``:
        +inf where a node of weight 0 borrows), as (by ClusterQueue, by cohort); None without fair sharing."""
        if self._state.config.fair_sharing is None:
            return None
        tree = self._state.tree
        return ({name: share_of(tree, node).weighted for name, node in tree.queues.items()},
                {name: share_of(tree, node).weighted for name, node in tree.cohorts.items()})

    def cohort_root(self, cq: str) -> str | None:
        """The name of the top of the ClusterQueue's cohort tree (the queue itself when it has no cohort)."""
        state = self._state
        return state.tree.root(cq).name if cq in state.tree.queues else None

    def explain(self, key: str, reason: Text) -> None:
        """Why the workload waits, as its driver knows it (nodes booting, a ProvisioningRequest, an unplaceable
        pod): its pending reason, shown in its status."""
        wl = self._state.workloads.get(key)
        if wl is not None:
            wl.pending_reason = reason

    def note_race_reasons(self) -> None:
        """Each workload still racing says why, as its variants stand now (its pending reason)."""
        state = self._state
        for key in state.variants:
            state.workloads[key].pending_reason = self._racing.race_reason(key)

    def configure(self, config: Config, now: float) -> None:
        """Replace the queue configuration at ``now``; usage of workloads holding quota is carried over, and a
        waiting workload that now races makes its variants then."""
        state = self._state
        state.config = config
        state.failed.clear()
        state.fitted.clear()
        state.tree = SchedulerState.tree_for(config)
        for wl in state.workloads.values():
            if wl.admission is not None and wl.cluster_queue in state.tree.queues:
                state.tree.add(wl.cluster_queue, wl.admission.usage())
        for wl in list(state.workloads.values()):
            self.enqueue(wl, now)
        state.queues.wake(list(config.cluster_queues), state.workloads)
        state.stops_due = _any_stopped(config)
        self._fair_queues()

    def use_fair_sharing(self, ledger: UsageLedger | None) -> None:
        """Kueue's admission fair sharing with the LocalQueues' usage in ``ledger`` (None: off): the ClusterQueues
        whose ``admissionScope`` asks for it order their lines by it, and their admissions charge it."""
        self._state.queues.use(ledger, self._state.workloads)
        self._fair_queues()

    def _fair_queues(self) -> None:
        state = self._state
        state.queues.recount = True
        state.queues.fair_queues = frozenset(name for name, cq in state.config.cluster_queues.items()
                                             if cq.fair_admission)
        state.queues.weights = state.config.queue_weights

    def fair_tick(self, now: float) -> None:
        """Take the LocalQueues' usage samples due by ``now`` (admission fair sharing)."""
        self._heard([], now)

    def _heard(self, events: list[Event], now: float) -> list[Event]:
        """What changed outside a cycle, told to the LocalQueues' usage (admission fair sharing)."""
        state = self._state
        state.queues.fair_step(events, now, state.workloads, state.holding)
        return events

    def enqueue(self, wl: Workload, now: float) -> None:
        """Queue a pending workload that is not queued, racing or waiting out a retry delay (its ClusterQueue
        appeared, or the configuration changed)."""
        state = self._state
        if wl.state is not WorkloadState.PENDING or wl.requeue_at is not None or wl.key in state.variants or \
                wl.cluster_queue not in state.config.cluster_queues or state.queues.queued(wl):
            return
        raced = None if wl.parent else self._racing.race(wl, now)
        if raced is None:
            state.queues.push(wl)
        else:
            state.deferred += raced

    def add(self, wl: Workload, now: float) -> list[Event]:
        """A new workload enters its queue (or, already holding quota, is restored as it was)."""
        state = self._state
        state.workloads[wl.key] = wl
        if wl.replaces:
            state.replaced_by[wl.replaces] = wl.key
        events = [Event(now, EventKind.CREATED, wl.key, wl.cluster_queue, extra=_owner(wl))]
        if wl.admission is not None:
            self._holdings.hold(wl)
            if needs_second_pass(wl):  # restored while its delayed topology request waited: tried again
                queue_second_pass(state, wl.key, now)
            return events
        wl.state = WorkloadState.PENDING
        if wl.cluster_queue not in state.config.cluster_queues:
            reason = (f"LocalQueue {wl.queue} doesn't exist" if not wl.cluster_queue
                      else f"ClusterQueue {wl.cluster_queue} doesn't exist")
            self._transitions.note_pending(wl, reason, PendingReason.MISCONFIGURED)
            return [*events, Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, reason)]
        raced = self._racing.race(wl, now)
        if raced is not None:
            return events + raced
        state.queues.push(wl)
        return events

    def delete(self, key: str, now: float) -> list[Event]:
        """The workload (or its job) was deleted: its quota is freed."""
        state = self._state
        wl = state.workloads.pop(key, None)
        if wl is None:
            return []
        if state.replaced_by.get(wl.replaces) == key:
            del state.replaced_by[wl.replaces]
        state.queues.discard(wl)
        state.last_assignment.pop(key, None)
        state.requeues.pop(key, None)
        state.requeue_order.pop(key, None)
        state.second_pass.pop(key, None)
        if state.queues.fair is not None:
            state.queues.fair.drop(wl)
        if wl.admission is not None:
            self._holdings.release(wl)
        return self._heard(self._racing.withdraw_all(wl, now, "Variant withdrawn: its workload was deleted"), now)

    def set_check(self, key: str, check: str, state: CheckState, now: float, message: str = "",
                  retry_after: float | None = None,
                  pod_set_updates: Mapping[str, PodSetUpdate] | None = None) -> list[Event]:
        """An admission check controller (or a person) reports a check's state for a workload (for a racing
        workload: for its variants that have the check)."""
        return self._heard(self._transitions.set_check(key, check, state, now, message, retry_after, pod_set_updates),
                           now)

    def replace_node(self, key: str, node: str, now: float) -> bool:
        """Kueue's failed node replacement: the pods ``key``'s topology assignment put on ``node`` (gone from the
        nodes) are placed on others of their domain, its admission rewritten (:mod:`flexq.scheduler.tas_replace`).
        False: its assignment does not name the node, or there is no replacement (nothing changed)."""
        wl = self._state.workloads.get(key)
        if wl is None or wl.admission is None or not names_node(wl.admission, node):
            return False
        admission = replacement(self._state, now, wl, node)
        if admission is None:
            return False
        wl.admission = admission
        return True

    def evict(self, key: str, now: float, reason: str, cause: str = "Evicted") -> list[Event]:
        """Evict from outside (a controller): release the quota and queue again."""
        return self._heard(self._transitions.evict(self._state.workloads[key], now, reason, cause), now)

    def evict_until(self, key: str, now: float, reason: str, cause: str, until: float,
                    ordering_time: float | None = None, underlying: str = "") -> list[Event]:
        """Evict from outside and keep out of the queue until ``until`` (Kueue's requeue backoff, as after a
        PodsReady timeout); it then queues again (a racing workload races again) ordered by ``ordering_time``
        (None: the moment it comes back). ``underlying``: the eviction's underlying cause in its scheduling stats."""
        state = self._state
        wl = state.workloads[key]
        events = self._transitions.evict(wl, now, reason, cause, requeue=False, underlying=underlying)
        if wl.state is not WorkloadState.PENDING:
            return events  # a slice whose replacement waits: that one carries the job on
        state.queues.discard(wl)
        wl.requeue_at = until
        state.requeues[key] = until
        if ordering_time is not None:
            state.requeue_order[key] = ordering_time
        return self._heard(events, now)

    def next_requeue(self) -> float | None:
        """The earliest moment the scheduler has something to do by itself: a retry delay or a flavor's
        cool-down ending, or a delayed topology request's second pass."""
        state = self._state
        times = [*state.requeues.values(), *(until for until, _ in state.unavailable.values()),
                 *(at for at, _ in state.second_pass.values())]
        return min(times) if times else None

    def mark_unavailable(self, flavor: str, until: float, why: str) -> None:
        """Remember that ``flavor`` cannot deliver nodes until ``until`` (flexq's fallback): the flavor
        search skips it, so workloads move on to the next flavor."""
        state = self._state
        state.unavailable[flavor] = (until, why)
        state.failed.clear()
        state.fitted.clear()

    def resize(self, key: str, podsets: tuple[PodSet, ...], now: float) -> list[Event]:
        """The job's pod counts changed in place: an elastic job that scaled down (its quota shrinks at once), or
        a workload not yet admitted (it is nominated again with its new shape). Growth of an admitted workload
        takes a new slice instead (:mod:`flexq.scheduler.slices`)."""
        state = self._state
        wl = state.workloads[key]
        if wl.admission is not None:
            admission = shrunk(wl.admission, {p.name: p.count for p in podsets})
            if wl.cluster_queue in state.tree.queues:
                state.tree.remove(wl.cluster_queue, wl.admission.usage())
                state.tree.add(wl.cluster_queue, admission.usage())
            freed, wl.admission = wl.admission, admission
            self._holdings.wake_tree(wl.cluster_queue)
            self._holdings.nodes_freed(freed)
        wl.podsets = podsets
        if wl.key in state.variants:  # racing: the variants race anew with the new shape
            events = self._racing.withdraw_all(wl, now, "Variant withdrawn: its workload was resized")
            return events + (self._racing.race(wl, now) or [])
        if wl.state is WorkloadState.PENDING and state.queues.queued(wl):
            state.queues.discard(wl)
            state.queues.push(wl)
        return []

    # --- the cycle ---

    def schedule(self, now: float, max_cycles: int = 1_000_000) -> list[Event]:
        """Run cycles at ``now`` until one changes nothing; return what happened."""
        return self._cycles.schedule(now, max_cycles)

    def cycle(self, now: float) -> tuple[list[Event], bool]:
        """One Kueue scheduling cycle. Returns its events and whether it admitted or preempted anything."""
        return self._cycles.cycle(now)

    # --- a workload's state changes, from outside ---

    def finish(self, key: str, now: float, reason: str = "JobFinished", outcome: str | None = None) -> list[Event]:
        """``key``'s job has ended; ``reason`` says how, and ``outcome`` (Succeeded or Failed) where it is known."""
        return self._heard(self._transitions.finish(key, now, reason, outcome), now)

    def complete_eviction(self, key: str, now: float) -> list[Event]:
        """A preempted workload has stopped: its quota is released and it queues again."""
        return self._heard(self._transitions.complete_eviction(key, now), now)

    def deactivate(self, key: str, now: float, reason: str = "The workload is deactivated",
                   cause: str = "Deactivated") -> list[Event]:
        """Deactivate a workload (``spec.active: false``): it is evicted if it holds quota and leaves its queue; a
        racing workload's variants are withdrawn. ``cause``: the eviction's reason (Kueue's ``Deactivated``, or
        ``DeactivatedDueTo<cause>`` where Kueue deactivated it itself)."""
        return self._heard(self._transitions.deactivate(key, now, reason, cause), now)

    def activate(self, key: str, now: float) -> list[Event]:
        """Reactivate a deactivated workload (``spec.active`` true again): it queues again, as Kueue requeues it
        (``Requeued``, ``Reactivated``)."""
        return self._transitions.activate(key, now)

    # --- races (concurrent admission) ---

    def settle(self, key: str, now: float) -> list[Event]:
        """Variant ``key`` wins: its parent takes its admission (migrating from where it runs, if it runs); the
        other variants are withdrawn, except, under ``TryPreferredFlavors``, the more preferred ones."""
        return self._heard(self._racing.settle(key, now), now)

    def refuse_migration(self, variant: Workload, now: float) -> list[Event]:
        """If ``variant`` would move its running workload and :attr:`migration_check` refuses, withdraw it."""
        return self._racing.refuse_migration(variant, now)

    def race_reason(self, key: str) -> Text:
        """Why a racing workload waits: each variant's reason, those nearest to starting first. Empty if it is not
        racing."""
        return self._racing.race_reason(key)

    def may_preempt(self, wl: Workload) -> bool:
        """Kueue's preemption gate for variants: one variant of a workload preempts at a time, none while a sibling
        holds quota, and none to move a workload that already runs."""
        return self._racing.may_preempt(wl)

    def flavor_plans(self, wl: Workload) -> list[VariantPlan]:
        """The flavors ``wl`` could race on in its ClusterQueue, most preferred first, each with the flavors its pod
        sets would take there; empty where only one flavor could hold it."""
        return self._racing.flavor_plans(wl)


def _any_stopped(config: Config) -> bool:
    return bool(config.stopped_queues) or any(cq.stop_policy != "None" for cq in config.cluster_queues.values())


def _owner(wl: Workload) -> dict[str, str]:
    return {"job": wl.owner} if wl.owner else {}
