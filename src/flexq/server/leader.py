"""Who runs the controllers: with SQLite the one server; with PostgreSQL the holder of the database's lease.

Every server serves the API (reads and writes go to the shared database). One leads: it holds the lease
``flexq-controller`` and runs the queue controller, the scheduler and the job runtime. The others try for the
lease a few times per lease period; when the leader stops renewing (it died, or lost the database), one of
them acquires it once it expires and starts its controller, which reads everything afresh from the store as a
restarted server does. A leader that cannot renew within two thirds of the period, or finds the lease taken,
stops its controller. ``GET /flexq/v1/leader`` says who leads.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter

from flexq.controller import QueueController, Sample, Tally
from flexq.server.forecast_api import forecast_router
from flexq.store import StoreError, rfc3339

if TYPE_CHECKING:
    from flexq.store import LeaseLike

__all__ = ["Leadership", "leader_router"]

log = logging.getLogger("flexq.leader")


class Leadership:
    """Runs ``make()``'s controller while this server leads. ``lease`` is a
    :class:`~flexq.store.lease.Lease` (PostgreSQL) or :class:`~flexq.store.sqlite_lease.SqliteLease` (a shared SQLite
    file), or None where this server is the only one (it always leads)."""

    def __init__(self, lease: LeaseLike | None, make: Callable[[], QueueController], identity: str) -> None:
        self.lease = lease
        self.identity = identity
        self._make = make
        self.controller = make()
        """The running controller while leading; an idle one (for /metrics' zeros) while not."""
        self.leading = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._renewed = 0.0
        self._switch = threading.Lock()
        """Held while a controller starts or stops."""

    def start(self) -> None:
        """Lead at once where the lease is free (or there is none), then keep trying or renewing."""
        if self.lease is None:
            self._lead()
            return
        self._attempt()
        self._thread = threading.Thread(target=self._run, name="flexq-leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.leading:
            self._step_down("the server is stopping")
        if self.lease is not None:
            self.lease.release()
            self.lease.close()

    def observe(self) -> tuple[Tally, Sample]:
        """The controller's figures, with Kueue's ``replica_role``: this server alone, or leading or following."""
        tally, sample = self.controller.observe()
        return tally, dataclasses.replace(sample, replica_role=self._role())

    def standing(self) -> Sample:
        """Where things stand, without the counters (:meth:`QueueController.standing`)."""
        return dataclasses.replace(self.controller.standing(), replica_role=self._role())

    def _role(self) -> str:
        return "standalone" if self.lease is None else "leader" if self.leading else "follower"

    def costs(self) -> dict[str, float]:
        return self.controller.costs()

    def leader(self) -> QueueController | None:
        """The controller while this server leads (None: ask the leader)."""
        return self.controller if self.leading else None

    def _run(self) -> None:
        assert self.lease is not None
        duration = self.lease.duration
        while not self._stop.wait(duration / 3 if self.leading else min(duration / 5, 1.0)):
            self._attempt()

    def _attempt(self) -> None:
        assert self.lease is not None
        try:
            held = self.lease.acquire()
        except StoreError as exc:
            log.warning("leader election: the database: %s", exc)
            if self.leading and time.monotonic() - self._renewed > self.lease.duration * 2 / 3:
                self._step_down("the lease could not be renewed in time")
            return
        if held:
            self._renewed = time.monotonic()
            if not self.leading:
                self._lead(wait=self._thread is None)
        elif self.leading:
            self._step_down("another server holds the lease")

    def _lead(self, *, wait: bool = True) -> None:
        """Start a controller; without ``wait``, in a thread of its own: reading everything afresh may take
        longer than the lease, which the election thread goes on renewing meanwhile."""
        if self.lease is not None:
            log.warning("%s leads: starting the controllers", self.identity)
        controller = self.controller if wait else self._make()  # at start-up, the one made with the server
        self.controller, self.leading = controller, True
        if wait:
            self._start(controller)
        else:
            threading.Thread(target=self._start, args=(controller,), name="flexq-controller-start",
                             daemon=True).start()

    def _start(self, controller: QueueController) -> None:
        with self._switch:
            if self.controller is controller and self.leading and not self._stop.is_set():
                controller.start()

    def _step_down(self, why: str) -> None:
        if self.lease is not None:
            log.warning("%s stops leading (%s): stopping the controllers", self.identity, why)
        with self._switch:
            self.leading = False
            # Its step under way ends before another controller may start (a new lead waits on the switch): two
            # controllers writing at once would decide twice.
            self.controller.stop(timeout=None)
            self.controller = self._make()

    def describe(self) -> dict[str, Any]:
        """What ``GET /flexq/v1/leader`` answers."""
        shown: dict[str, Any] = {"identity": self.identity, "leading": self.leading}
        if self.lease is None:
            return {**shown, "holder": self.identity, "store": "sqlite"}
        store = self.lease.kind
        try:
            held = self.lease.read()
        except StoreError as exc:
            return {**shown, "holder": None, "store": store, "error": str(exc)}
        if held is None:
            return {**shown, "holder": None, "store": store}
        return {**shown, "store": store, "holder": None if held.expired else held.holder,
                "lease": {"name": self.lease.name, "holderIdentity": held.holder, "acquireTime": rfc3339(held.acquired),
                          "renewTime": rfc3339(held.renewed), "leaseDurationSeconds": held.duration,
                          "leaseTransitions": held.transitions, "expired": held.expired}}


def leader_router(leadership: Leadership) -> APIRouter:
    """What only the leader answers: who leads, and (from its controller) what-if forecasts. Kueue's visibility API,
    also the controller's, is served in the Kubernetes API's lane (:mod:`flexq.server.visibility`, given
    :meth:`Leadership.leader` as ``create_app``'s ``leader``)."""
    router = APIRouter()
    router.include_router(forecast_router(leadership.leader))

    @router.get("/flexq/v1/leader", tags=["cluster"], summary="Which server runs the controllers")
    async def leader() -> dict[str, Any]:
        """This server's identity, whether it leads, and the lease (with PostgreSQL): its holder, when it was
        acquired and last renewed, for how long, how often it changed hands."""
        return leadership.describe()

    return router
