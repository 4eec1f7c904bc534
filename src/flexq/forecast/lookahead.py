"""When each waiting job will start: a forked control plane run forward in virtual time.

Every job runs for its run time (:mod:`flexq.control.run_times`): a running job ends at its start plus that (at
once, if it has run longer already), a waiting job that starts in the run ends that long after. Nothing new
arrives. The run goes until every waiting job has started or the horizon is reached; what each saw on the way
(the quota that freed for it, its ProvisioningRequest's answer, its nodes' boot) is kept as :class:`Step` values
with their times, for the edge to put into words (:func:`flexq.forecast.text.describe`).

A forecast is as sure as the least sure run time it rests on: a start that waited for a job whose run time was
estimated is itself an estimate (:class:`~flexq.control.run_times.Basis`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from flexq.control import Basis, ControlPlane, JobFinished, JobHooks, JobQueued
from flexq.forecast.snapshot import Fork, fork
from flexq.scheduler import Event, EventKind, WorkloadState

__all__ = ["HORIZON", "Forecast", "Step", "StepKind", "forecast", "waiting"]

HORIZON: Final = 30 * 24 * 3600.0
"""How far ahead a forecast looks: a job not started by then is forecast as not starting within it."""
_MAX_INSTANTS: Final = 200_000
"""A bound on the instants one run visits, whatever the state (a run that reaches it says so)."""
_FINISH, _WAKE = 0, 3


class StepKind(Enum):
    QUOTA = "quota"
    """Quota freed in its cohort tree: ``what`` names the job that ended."""
    PROVISIONING = "provisioning"
    """Its ProvisioningRequest was answered."""
    NODES = "nodes"
    """Nodes were asked for it (ready at ``at``)."""
    FALLBACK = "fallback"
    """A flavor could not deliver: it moved on."""


@dataclass(frozen=True, slots=True)
class Step:
    kind: StepKind
    at: float
    what: str = ""


@dataclass(frozen=True, slots=True)
class Forecast:
    """Where and when a waiting workload is expected to start, and how sure that is."""

    workload: str
    cluster_queue: str
    made: float
    """The instant the forecast starts from."""
    start: float | None
    """None: not within the horizon (or only after a job whose run time nobody knows ends)."""
    flavors: tuple[str, ...] = ()
    basis: Basis = Basis.DECLARED
    steps: tuple[Step, ...] = ()
    cost: float | None = None
    """USD its run is expected to cost, where capacity is modelled and its run time is known."""
    blocked_by: str = ""
    """Without a start: the running job of unknown run time it waits behind, where one is."""

    @property
    def wait(self) -> float | None:
        return None if self.start is None else self.start - self.made


@dataclass
class _Track:
    started: dict[str, tuple[float, tuple[str, ...]]] = field(default_factory=dict)
    costs: dict[str, float] = field(default_factory=dict)
    """What each started target's run is expected to cost, where capacity is modelled and its run time known."""
    steps: dict[str, list[Step]] = field(default_factory=dict)
    basis: dict[str, Basis] = field(default_factory=dict)
    """The least sure run time each cohort tree's freed quota rests on so far."""
    start_basis: dict[str, Basis] = field(default_factory=dict)
    finish_at: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)


def waiting(plane: ControlPlane) -> list[str]:
    """The workloads whose jobs have not started: pending, holding quota with checks to pass, or admitted with
    their nodes still to come (racing variants are their workload's)."""
    driver = plane.driver
    out = []
    for wl in plane.scheduler.workloads():
        if wl.parent or wl.state in (WorkloadState.FINISHED, WorkloadState.INACTIVE):
            continue
        if wl.state is WorkloadState.ADMITTED and (driver is None or wl.key in driver.running):
            continue
        out.append(wl.key)
    return out


class _Run:
    def __init__(self, plane: ControlPlane, now: float, horizon: float, extra: Iterable[tuple[JobQueued, float | None]]
                 ) -> None:
        self.track = _Track()
        self.horizon = now + horizon
        self.fork: Fork = fork(plane, now, self._told, JobHooks(self._started, self._run_time, self._finish_eta))
        self.plane = self.fork.plane
        self.targets = set(waiting(self.fork.plane))
        for queued, run in extra:
            if run is not None:
                self.fork.run_times.declared[queued.workload.key] = run
            self.plane.emit(self.plane.feed(queued))
            self.targets.add(queued.workload.key)
        self.unknown_running: dict[str, str] = {}
        """Cohort tree -> a job running in it whose run time nobody knows (it frees nothing within the run)."""

    # --- the hooks -------------------------------------------------------------------------------------

    def _run_time(self, key: str) -> float | None:
        wl = self.plane.scheduler.workload(key)
        return self.fork.run_times.of(key, wl.cluster_queue if wl is not None else "").seconds

    def _finish_eta(self, key: str) -> float | None:
        return self.track.finish_at.get(key)

    def _root(self, key: str) -> str:
        wl = self.plane.scheduler.workload(key)
        root = self.plane.scheduler.cohort_root(wl.cluster_queue) if wl is not None else None
        return root or ""

    def _started(self, key: str, t: float) -> None:
        wl = self.plane.scheduler.workload(key)
        if wl is None:
            return
        if key in self.targets and key not in self.track.started:
            flavors = tuple(sorted(wl.admission.flavors())) if wl.admission is not None else ()
            self.track.started[key] = (t, flavors)
            self.track.start_basis[key] = self.track.basis.get(self._root(key), Basis.DECLARED)
            driver, run = self.plane.driver, self._run_time(key)
            if driver is not None and run is not None:
                self.track.costs[key] = driver.cost(key) + driver.hourly(key) * run / 3600
        self._plan_finish(key, t, self.track.start_basis.get(key, self.track.basis.get(self._root(key),
                                                                                        Basis.DECLARED)))

    def _plan_finish(self, key: str, started: float, basis: Basis) -> None:
        wl = self.plane.scheduler.workload(key)
        if wl is None:
            return
        run = self.fork.run_times.of(key, wl.cluster_queue)
        if run.seconds is None:
            self.unknown_running.setdefault(self._root(key), wl.owner or key)
            return
        at = max(self.fork.now, started + run.seconds)
        self.track.finish_at[key] = at
        sure = max(basis, run.basis)
        self.fork.kernel.schedule(at, lambda: self._finish(key, at, sure), _FINISH)

    def _finish(self, key: str, at: float, basis: Basis) -> None:
        wl = self.plane.scheduler.workload(key)
        if wl is None or self.track.finish_at.get(key) != at or wl.state is not WorkloadState.ADMITTED:
            return  # evicted since it started: this run does not end here
        root = self._root(key)
        self.track.basis[root] = max(self.track.basis.get(root, Basis.DECLARED), basis)
        self.track.ended[key] = at
        self.plane.emit(self.plane.feed(JobFinished(key, at)))
        for other in self.targets:
            if other not in self.track.started and self._root(other) == root:
                self._step(other, Step(StepKind.QUOTA, at, wl.owner or key))

    # --- what happens ----------------------------------------------------------------------------------

    def _step(self, key: str, step: Step) -> None:
        steps = self.track.steps.setdefault(key, [])
        if step.kind is StepKind.QUOTA and steps and steps[-1].kind is StepKind.QUOTA:
            steps[-1] = step  # only the last job whose end it waited for
        else:
            steps.append(step)

    def _told(self, event: Event) -> None:
        key = event.workload
        wl = self.plane.scheduler.workload(key)
        if wl is not None and wl.parent:
            key = wl.parent
        if key not in self.targets or key in self.track.started:
            return
        if event.kind is EventKind.PROVISIONING_REQUEST and event.extra.get("state") == "Provisioned":
            self._step(key, Step(StepKind.PROVISIONING, event.t, str(event.extra.get("request", ""))))
        elif event.kind is EventKind.SCALED_UP:
            self._step(key, Step(StepKind.NODES, event.t, str(event.extra.get("pool", ""))))
        elif event.kind is EventKind.FALLBACK:
            self._step(key, Step(StepKind.FALLBACK, event.t, str(event.extra.get("flavor", ""))))

    # --- the run ---------------------------------------------------------------------------------------

    def run(self) -> dict[str, Forecast]:
        plane, kernel = self.plane, self.fork.kernel
        for wl in plane.scheduler.workloads():
            started = plane.started_at(wl.key)
            if started is not None and not wl.parent and wl.key not in self.targets:
                self._plan_finish(wl.key, started, Basis.DECLARED)
        plane.settle(self.fork.now)
        instants = 0
        woken: set[float] = set()
        while len(self.track.started) < len(self.targets) and instants < _MAX_INSTANTS:
            nxt = plane.scheduler.next_requeue()
            if nxt is not None and nxt not in woken:
                woken.add(nxt)
                kernel.schedule(nxt, lambda: None, _WAKE)
            t = kernel.next_at()
            if t is None or t > self.horizon:
                break
            while kernel.next_at() == t:
                kernel.step()
            plane.settle(t)
            instants += 1
        return {key: self._forecast(key) for key in sorted(self.targets)}

    def _forecast(self, key: str) -> Forecast:
        wl = self.plane.scheduler.held(key)
        steps = tuple(self.track.steps.get(key, ()))
        if key not in self.track.started:
            return Forecast(key, wl.cluster_queue, self.fork.now, None, basis=Basis.UNKNOWN, steps=steps,
                            blocked_by=self.unknown_running.get(self._root(key), ""))
        at, flavors = self.track.started[key]
        return Forecast(key, wl.cluster_queue, self.fork.now, at, flavors, self.track.start_basis[key], steps,
                        self.track.costs.get(key))


def forecast(plane: ControlPlane, now: float, horizon: float = HORIZON,
             extra: Iterable[tuple[JobQueued, float | None]] = ()) -> dict[str, Forecast]:
    """A forecast for every workload of ``plane`` whose job has not started, from ``now``: ``plane`` is copied
    (:func:`~flexq.forecast.snapshot.fork`) and left as it was. ``extra``: workloads queued in the copy only, each
    with its run time where known (what if they were submitted now?)."""
    return _Run(plane, now, horizon, extra).run()

