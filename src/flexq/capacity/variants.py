"""The capacity driver's side of racing: variants that win by starting, withdrawn claims, pools waited for.

:class:`RacingCapacity` is mixed into :class:`~flexq.capacity.driver.CapacityDriver` and works on its cluster
and timers: the first variant whose pods can start wins (its booked capacity goes to its workload), a losing
variant's ProvisioningRequest is withdrawn (what it had provisioned is released and billed as waste), a request
for a pool at its maximum waits for room (flexq's policy) instead of failing, and a running workload moves to a
more preferred flavor only when that makes it finish sooner.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from flexq.capacity.cluster import Cluster
from flexq.capacity.provisioning import ProvisioningState
from flexq.capacity.settings import CapacityConfig
from flexq.durations import format_seconds
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import Workload
from flexq.scheduler.scheduler import Scheduler

__all__ = ["RacingCapacity", "finishes_sooner_here"]


class RacingCapacity:
    """Racing in the capacity driver (a mixin: the driver provides what is declared here)."""

    config: CapacityConfig
    cluster: Cluster
    scheduler: Scheduler
    log: Callable[[list[Event]], None]
    requests: dict[str, tuple[str, str, str]]
    waiting_room: dict[str, list[tuple[str, str, str, int]]]
    waste: dict[str, float]
    parent_of: dict[str, str]
    costs: dict[str, float]
    run_time: Callable[[str], float | None]
    finish_eta: Callable[[str], float | None]
    started_at: dict[str, float]
    _virtual: bool

    def _now(self) -> float:
        raise NotImplementedError

    def _note(self, kind: EventKind, workload: str, reason: str, **extra: Any) -> None:
        raise NotImplementedError

    def _cq(self, key: str) -> str:
        raise NotImplementedError

    def _release(self, key: str) -> None:
        raise NotImplementedError

    def _later(self, at: float, key: str, action: Callable[[], None]) -> None:
        raise NotImplementedError

    def _provision(self, key: str, check: str, name: str, pool: str, count: int) -> None:
        raise NotImplementedError

    def _expected_finish(self, key: str) -> float | None:
        run, since = self.run_time(key), self.started_at.get(key)
        return None if run is None or since is None else since + run

    def _migration_check(self, parent: Workload, variant: Workload, now: float) -> str | None:
        """Refuse to move a running job that would finish sooner where it runs (:func:`finishes_sooner_here`); one
        whose nodes go before it would finish may move."""
        expiry = min((n.expires_at for n in self.cluster.nodes_of(parent.key) if n.expires_at is not None),
                     default=None)
        return finishes_sooner_here(self.run_time(parent.key), self.started_at.get(parent.key), now,
                                    virtual=self._virtual, cut_off=expiry)

    def _win(self, key: str, wl: Workload) -> None:
        """Variant ``key`` can start first: its parent takes its admission and the capacity it booked, and starts
        there (the other variants are withdrawn by the scheduler's events)."""
        for node in self.cluster.nodes.values():
            if node.booked_for == key:
                node.booked_for = wl.parent
        self._note(EventKind.RACE_WON, key, f"flavor {wl.flavor} can start the workload first: it runs there")
        self.log(self.scheduler.settle(key, self._now()))

    def _withdraw(self, key: str, parent: str) -> None:
        """A losing variant's claim goes: its ProvisioningRequest is withdrawn, capacity booked for it released
        (billed to the workload from provisioning to now: flex-start capacity is paid once provisioned)."""
        now = self._now()
        booked = [n for n in self.cluster.nodes.values() if n.booked_for == key and not n.pods]
        spent = sum(self.cluster.pools[n.pool].hourly * (now - n.ready_at) / 3600 for n in booked
                    if n.pool in self.cluster.pools)
        request = self.requests.get(key)
        self.cluster.remove(n.name for n in booked)
        if spent and parent:
            self.waste[parent] = self.waste.get(parent, 0.0) + spent
            self.costs[parent] = self.costs.get(parent, 0.0) + spent
        if request is not None:
            if parent:
                self.parent_of[key] = parent  # the note goes on the story of the workload it raced for
            what = (f"its {len(booked)} provisioned node(s) released (${spent:.2f} billed)" if booked
                    else "before it was provisioned: no cost")
            self._note(EventKind.PROVISIONING_REQUEST, key,
                       f"ProvisioningRequest {request[1]} withdrawn {what}: the workload "
                       "races on another flavor", request=request[1], state=ProvisioningState.WITHDRAWN)
        self._release(key)

    def _make_room(self) -> None:
        """Requests waiting for room in a pool at its maximum: idle slices of that pool go at once, and waiting
        requests are provisioned in order while they fit."""
        now = self._now()
        for pool_name, waiting in self.waiting_room.items():
            if not waiting or pool_name not in self.cluster.pools:
                continue
            pool = self.cluster.pools[pool_name]
            removed = self.cluster.scale_down(now, 0.0, [pool_name])  # idle slices go now, not after a while
            if removed:
                self.log([Event(now, EventKind.SCALED_DOWN, "", "",
                                f"node pool {pool_name}: {len(removed)} idle node(s) removed to make room for "
                                "a waiting ProvisioningRequest",
                                extra={"pool": pool_name, "nodes": self.cluster.pool_size(pool_name)})])
            planned = self.cluster.pool_size(pool_name)
            while waiting and planned + waiting[0][3] <= pool.max_nodes:
                planned += waiting[0][3]
                self._provision_later(now, pool_name, *waiting.pop(0))

    def _provision_later(self, at: float, pool: str, key: str, check: str, name: str, count: int) -> None:
        self._later(at, key, partial(self._provision, key, check, name, pool, count))

    def _wait_for_room(self, key: str, check: str, name: str, pool: str, count: int, why: str) -> None:
        """flexq's policy: a pool at its maximum is a wait, not a failure. The request stays Accepted and is
        provisioned when the pool has room (as soon as a slice there is free: idle slices go at once)."""
        self.waiting_room.setdefault(pool, []).append((key, check, name, count))
        holders = sorted({w for n in self.cluster.nodes.values() if n.pool == pool for w in n.pods})
        etas = [t for t in (self.finish_eta(h) for h in holders) if t is not None]
        now = self._now()
        eta = ""
        if etas:
            at = min(etas)
            eta = f"; a slice frees at t={format_seconds(at)}" if self._virtual else \
                f"; a slice frees in {format_seconds(at - now)}"
        self._note(EventKind.PROVISIONING_REQUEST, key,
                   f"ProvisioningRequest {name} waits for room: {why}{eta}", request=name,
                   state=ProvisioningState.ACCEPTED, eta=min(etas) if etas else None)
        wl = self.scheduler.workload(key)
        if wl is not None:
            self.scheduler.explain(wl.key, f"ProvisioningRequest {name} waits for room in node pool {pool}{eta}")
        self._make_room()


def finishes_sooner_here(run: float | None, since: float | None, now: float, *, virtual: bool,
                         cut_off: float | None = None) -> str | None:
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

    def at(t: float) -> str:
        return f"t={format_seconds(t)}" if virtual else f"in {format_seconds(t - now)}"

    return f"it finishes sooner where it runs ({at(here)}) than moved ({at(there)})"
