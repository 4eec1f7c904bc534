"""Racing in the capacity driver: variants that win by starting, withdrawn claims, pools waited for.

:class:`Racing`: the first variant whose pods can start wins (its booked capacity goes to its workload); a losing
variant's ProvisioningRequest is withdrawn (what it had provisioned is released and billed as waste); a running
workload moves to a more preferred flavor only when that makes it finish sooner (:func:`finishes_sooner_here`).
:class:`WaitingRoom`: under flexq's policy a request for a pool at its maximum waits for room instead of failing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from flexq.capacity.cluster import Cluster
from flexq.capacity.notes import PoolNote, ProvisioningState, RequestNote, Teller, WorkloadNote
from flexq.capacity.record import Records, Timeline
from flexq.scheduler import EventKind, Moment, MomentForm, Phrase, Scheduler, Workload

__all__ = ["Expected", "Racing", "WaitingRoom", "finishes_sooner_here"]


@dataclass(slots=True)
class Expected:
    """What is known of workloads' runs: how long one runs once started (the simulator's ``runFor``; live, the job's
    ``flexq.dev/expected-run-time``), and when a running one finishes (``finish_eta``; None: from its run time)."""

    records: Records
    run_time: Callable[[str], float | None]
    finish_eta: Callable[[str], float | None] | None = None

    def finish_at(self, key: str) -> float | None:
        if self.finish_eta is not None:
            return self.finish_eta(key)
        record = self.records.get(key)
        run, since = self.run_time(key), record.started_at if record is not None else None
        return None if run is None or since is None else since + run


class Racing:
    """The capacity side of a race between a workload's variants."""

    def __init__(self, cluster: Cluster, records: Records, teller: Teller, scheduler: Scheduler,
                 expected: Expected) -> None:
        self.cluster = cluster
        self.records = records
        self.teller = teller
        self.scheduler = scheduler
        self.expected = expected

    def migration_check(self, parent: Workload, variant: Workload, now: float) -> Phrase | None:
        """Refuse to move a running job that would finish sooner where it runs (:func:`finishes_sooner_here`); one
        whose nodes go before it would finish may move."""
        expiry = min((n.expires_at for n in self.cluster.nodes_of(parent.key) if n.expires_at is not None),
                     default=None)
        record = self.records.get(parent.key)
        return finishes_sooner_here(self.expected.run_time(parent.key), record.started_at if record else None, now,
                                    cut_off=expiry)

    def win(self, key: str, wl: Workload) -> None:
        """Variant ``key`` can start first: its parent takes its admission and the capacity it booked, and starts
        there (the other variants are withdrawn by the scheduler's events)."""
        for node in self.cluster.nodes.values():
            if node.booked_for == key:
                node.booked_for = wl.parent
        self.teller.on(EventKind.RACE_WON, key, f"flavor {wl.flavor} can start the workload first: it runs there",
                       WorkloadNote())
        self.teller.log(self.scheduler.settle(key, self.teller.now()))

    def withdraw(self, key: str, parent: str) -> None:
        """A losing variant's claim goes: its ProvisioningRequest is withdrawn, capacity booked for it released
        (billed to the workload from provisioning to now: flex-start capacity is paid once provisioned). The
        variant's own record is released by the caller."""
        now = self.teller.now()
        booked = [n for n in self.cluster.nodes.values() if n.booked_for == key and not n.pods]
        spent = sum(self.cluster.pools[n.pool].hourly * (now - n.ready_at) / 3600 for n in booked
                    if n.pool in self.cluster.pools)
        record = self.records.get(key)
        request = record.request if record is not None else None
        self.cluster.remove(n.name for n in booked)
        if spent and parent:
            self.records.of(parent).charge(spent)
        if request is not None:
            if parent:
                self.records.of(key).raced_for = parent  # the note goes on the story of the workload it raced for
            what = (f"its {len(booked)} provisioned node(s) released (${spent:.2f} billed)" if booked
                    else "before it was provisioned: no cost")
            self.teller.on(EventKind.PROVISIONING_REQUEST, key,
                           f"ProvisioningRequest {request.name} withdrawn {what}: the workload races on another "
                           "flavor", RequestNote(request.name, ProvisioningState.WITHDRAWN))


class WaitingRoom:
    """flexq's policy: a request for a pool at its maximum waits, in arrival order, until the pool has room (as soon
    as a slice there is free: idle slices go at once); then ``provision`` provisions it (key, check, request, pool,
    nodes)."""

    def __init__(self, cluster: Cluster, timeline: Timeline, teller: Teller, scheduler: Scheduler,
                 expected: Expected, provision: Callable[[str, str, str, str, int], None]) -> None:
        self.cluster = cluster
        self.timeline = timeline
        self.teller = teller
        self.scheduler = scheduler
        self.expected = expected
        self.provision = provision
        self.waiting: dict[str, list[tuple[str, str, str, int]]] = {}
        """pool -> (workload, check, request, nodes), in arrival order."""

    def forget(self, key: str) -> None:
        """``key`` no longer waits (released)."""
        for waiting in self.waiting.values():
            waiting[:] = [w for w in waiting if w[0] != key]

    def wait(self, key: str, check: str, name: str, pool: str, count: int, why: str) -> None:
        """The request ``name`` of ``key`` waits for room for ``count`` nodes in ``pool``: it stays Accepted."""
        self.waiting.setdefault(pool, []).append((key, check, name, count))
        holders = sorted({w for n in self.cluster.nodes.values() if n.pool == pool for w in n.pods})
        etas = [t for t in (self.expected.finish_at(h) for h in holders) if t is not None]
        eta = Phrase(("; a slice frees ", Moment(min(etas), MomentForm.AFTER_VERB))) if etas else ""
        self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} waits for room: {why}" + eta,
                       RequestNote(name, ProvisioningState.ACCEPTED, eta=min(etas) if etas else None, room=pool))
        wl = self.scheduler.workload(key)
        if wl is not None:
            self.scheduler.explain(wl.key, f"ProvisioningRequest {name} waits for room in node pool {pool}" + eta)
        self.make_room()

    def make_room(self) -> None:
        """Idle slices of pools with waiting requests go at once, and waiting requests are provisioned in order while
        they fit."""
        now = self.timeline.now()
        for pool_name, waiting in self.waiting.items():
            if not waiting or pool_name not in self.cluster.pools:
                continue
            pool = self.cluster.pools[pool_name]
            removed = self.cluster.scale_down(now, 0.0, [pool_name])  # idle slices go now, not after a while
            if removed:
                self.teller.pool(EventKind.SCALED_DOWN, f"node pool {pool_name}: {len(removed)} idle node(s) removed "
                                 "to make room for a waiting ProvisioningRequest",
                                 PoolNote(pool_name, self.cluster.pool_size(pool_name)))
            planned = self.cluster.pool_size(pool_name)
            while waiting and planned + waiting[0][3] <= pool.max_nodes:
                planned += waiting[0][3]
                key, check, name, count = waiting.pop(0)
                self.timeline.later(now, key, partial(self.provision, key, check, name, pool_name, count))


def finishes_sooner_here(run: float | None, since: float | None, now: float, *,
                         cut_off: float | None = None) -> Phrase | None:
    """Why a job running for ``run`` seconds since ``since`` is not moved at ``now`` (None: it may move): moved, it
    restarts from the beginning (or its last checkpoint) on the new flavor, so it stays where it would finish sooner.
    A run time nobody knows lets it move, as in Kueue; so does a ``cut_off`` (its nodes go) before it would finish."""
    if run is None or since is None:
        return None
    here = since + run
    if cut_off is not None and cut_off < here:
        return None  # its nodes go before it would finish: moving can only help
    there = now + run
    if there < here:
        return None
    return Phrase(("it finishes sooner where it runs (", Moment(here), ") than moved (", Moment(there), ")"))
