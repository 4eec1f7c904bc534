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

import copy
import dataclasses
import functools
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from flexq.capacity import CapacityConfig, FallbackNote, PoolNote, ProvisioningState, RequestNote
from flexq.control import Basis, ControlPlane, JobFinished, JobHooks, JobQueued, RunTime
from flexq.forecast.snapshot import Fork, fork
from flexq.scheduler import Admission, Event, EventKind, Text, Workload, WorkloadState

__all__ = ["DEEP", "HORIZON", "SAMPLES", "Forecast", "Lookahead", "Step", "StepKind", "ensemble", "forecast",
           "samples_for", "waiting", "waits"]

HORIZON: Final = 30 * 24 * 3600.0
"""How far ahead a forecast looks: a job not started by then is forecast as not starting within it."""
SAMPLES: Final = 4
"""Runs with drawn run times besides the one with their means, where run times are estimated (:func:`ensemble`)."""
DEEP: Final = 1000
"""Waiting workloads up to which an ensemble draws all its samples (:func:`samples_for`)."""
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
    why: Text = ""
    """Without a start: why it still waited when the run ended (its pending reason then, worded where shown)."""
    likely: tuple[float, float] | None = None
    """Where run times are estimated (:func:`ensemble`): the earliest and the latest start of the ensemble's runs; the
    start falls in that range a little over half the time (``bench/forecast_bench.py`` measures it). None where the
    start rests on no estimate, or some run foresaw none."""

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
    freed: dict[str, Step] = field(default_factory=dict)
    """Each cohort tree's last job to end (the quota it freed) in the run so far."""


def _nothing() -> None:
    """A wake-up: the run settles at its moment (a workload's retry delay ends)."""


def waits(plane: ControlPlane, wl: Workload) -> bool:
    """Whether a workload's job has not started: pending, holding quota with checks to pass, or admitted with its
    nodes still to come (a racing variant is its workload's business, not a job of its own)."""
    if wl.parent or wl.state in (WorkloadState.FINISHED, WorkloadState.INACTIVE):
        return False
    driver = plane.driver
    return not (wl.state is WorkloadState.ADMITTED and (driver is None or wl.key in driver.running))


def waiting(plane: ControlPlane) -> list[str]:
    """The workloads of ``plane`` whose jobs have not started (:func:`waits`)."""
    return [wl.key for wl in plane.scheduler.workloads() if waits(plane, wl)]


class Lookahead:
    """A plane forked at ``now`` (when made: under the plane owner's lock), then :meth:`run` (anywhere)."""

    def __init__(self, plane: ControlPlane, now: float, horizon: float = HORIZON,
                 extra: Iterable[tuple[JobQueued, float | None]] = (), capacity: CapacityConfig | None = None) -> None:
        self.track = _Track()
        self.horizon = now + horizon
        self.fork: Fork = fork(plane, now, self._told, JobHooks(self._started, self._run_time, self._finish_eta))
        self.plane = self.fork.plane
        self.targets = set(waiting(self.fork.plane))
        self.unknown_running: dict[str, str] = {}
        """Cohort tree -> a job running in it whose run time nobody knows (it frees nothing within the run)."""
        self.rng: random.Random | None = None
        """Set: estimated run times are drawn from the finished jobs' (one sample of an ensemble)."""
        self._drawn: dict[str, RunTime] = {}
        self._admission: Admission | None = None
        self._sorted: tuple[str, ...] = ()
        """The last admission whose flavors were sorted (:meth:`_flavors`), and them."""
        if capacity is not None:
            self.fork.reshape(capacity)
        for queued, run in extra:
            if run is not None:
                self.fork.run_times.declared[queued.workload.key] = run
            self.plane.emit(self.plane.feed(queued))
            self.targets.add(queued.workload.key)

    # --- the hooks -------------------------------------------------------------------------------------

    def _run_time(self, key: str) -> float | None:
        wl = self.plane.scheduler.workload(key)
        return self._run(key, wl.cluster_queue if wl is not None else "", None).seconds

    def _run(self, key: str, cluster_queue: str, elapsed: float | None) -> RunTime:
        """A workload's run time from its start (``elapsed`` None), or what is left of it after ``elapsed``; within
        one run the same each time it is asked."""
        known = self._drawn.get(key)
        if known is None:
            times = self.fork.run_times
            known = (times.of(key, cluster_queue, self.rng) if elapsed is None else
                     times.remaining(key, cluster_queue, elapsed, self.rng))
            self._drawn[key] = known
        return known

    def _finish_eta(self, key: str) -> float | None:
        return self.track.finish_at.get(key)

    def _root(self, key: str) -> str:
        wl = self.plane.scheduler.workload(key)
        return self._root_of(wl) if wl is not None else ""

    def _root_of(self, wl: Workload) -> str:
        return self.plane.scheduler.cohort_root(wl.cluster_queue) or ""

    def _started(self, key: str, t: float) -> None:
        wl = self.plane.scheduler.workload(key)
        if wl is None:
            return
        track, root = self.track, self._root_of(wl)
        root_basis = track.basis.get(root, Basis.DECLARED)
        if key in self.targets and key not in track.started:
            flavors = self._flavors(wl.admission) if wl.admission is not None else ()
            track.started[key] = (t, flavors)
            freed = track.freed.get(root)
            reserved = wl.reserved_at if wl.reserved_at is not None else t
            if freed is not None and reserved >= freed.at:  # the last end in its cohort tree before it got quota
                steps = track.steps.setdefault(key, [])
                steps.append(freed)
                steps.sort(key=lambda step: step.at)
            # Behind a job whose run time nobody knows, a start is at the latest: that job may end any time.
            track.start_basis[key] = Basis.UNKNOWN if self.unknown_running else root_basis
            driver, run = self.plane.driver, self._run(key, wl.cluster_queue, None).seconds
            if driver is not None and run is not None:
                track.costs[key] = driver.cost(key) + driver.hourly(key) * run / 3600
        self._plan_finish(wl, t, track.start_basis.get(key, root_basis))

    def _flavors(self, admission: Admission) -> tuple[str, ...]:
        """The flavors of ``admission``, sorted: admissions are values, and workloads admitted alike share one."""
        if admission is not self._admission:
            self._admission, self._sorted = admission, tuple(sorted(admission.flavors()))
        return self._sorted

    def _plan_finish(self, wl: Workload, started: float, basis: Basis) -> None:
        key, now = wl.key, self.fork.now
        run = self._run(key, wl.cluster_queue, None if started >= now else now - started)
        if run.seconds is None:
            self.unknown_running.setdefault(self._root_of(wl), wl.owner or key)
            return
        at = max(now, started + run.seconds) if started >= now else now + run.seconds
        self.track.finish_at[key] = at
        sure = max(basis, run.basis)
        self.fork.kernel.schedule(at, functools.partial(self._finish, key, at, sure), _FINISH)  # copyable

    def _finish(self, key: str, at: float, basis: Basis) -> None:
        wl = self.plane.scheduler.workload(key)
        if wl is None or self.track.finish_at.get(key) != at or wl.state is not WorkloadState.ADMITTED:
            return  # evicted since it started: this run does not end here
        root = self._root_of(wl)
        self.track.basis[root] = max(self.track.basis.get(root, Basis.DECLARED), basis)
        self.track.freed[root] = Step(StepKind.QUOTA, at, wl.owner or key)
        self.plane.emit(self.plane.feed(JobFinished(key, at)))

    # --- what happens ----------------------------------------------------------------------------------

    def _step(self, key: str, step: Step) -> None:
        self.track.steps.setdefault(key, []).append(step)

    def _told(self, event: Event) -> None:
        if event.payload is None:
            return  # a scheduler's event: what it says of a target is kept as the run goes (started, freed)
        key = event.workload
        wl = self.plane.scheduler.workload(key)
        if wl is not None and wl.parent:
            key = wl.parent
        if key not in self.targets or key in self.track.started:
            return
        match event.payload:
            case RequestNote(request=request, state=ProvisioningState.PROVISIONED):
                self._step(key, Step(StepKind.PROVISIONING, event.t, request))
            case PoolNote(pool=pool) if event.kind is EventKind.SCALED_UP:
                self._step(key, Step(StepKind.NODES, event.t, pool))
            case FallbackNote(flavor=flavor):
                self._step(key, Step(StepKind.FALLBACK, event.t, flavor))
            case _:
                pass

    # --- the run ---------------------------------------------------------------------------------------

    def run(self) -> dict[str, Forecast]:
        self._advance()
        return {key: self._forecast(key) for key in sorted(self.targets)}

    def _advance(self) -> None:
        """Run ahead until every target has started, or to the horizon."""
        plane, kernel = self.plane, self.fork.kernel
        for wl in plane.scheduler.workloads():
            started = plane.started_at(wl.key)
            if started is not None and not wl.parent and wl.key not in self.targets:
                self._plan_finish(wl, started, Basis.DECLARED)
        plane.settle(self.fork.now)
        instants = 0
        woken: set[float] = set()
        while len(self.track.started) < len(self.targets) and instants < _MAX_INSTANTS:
            nxt = plane.scheduler.next_requeue()
            if nxt is not None and nxt not in woken:
                woken.add(nxt)
                kernel.schedule(nxt, _nothing, _WAKE)
            t = kernel.next_at()
            if t is None or t > self.horizon:
                break
            while kernel.next_at() == t:
                kernel.step()
            plane.settle(t)
            instants += 1

    def _start(self, key: str) -> tuple[bool, float]:
        """When target ``key`` started in the run, as an ensemble orders starts: none last."""
        started = self.track.started.get(key)
        return (True, 0.0) if started is None else (False, started[0])

    def _forecast(self, key: str) -> Forecast:
        wl = self.plane.scheduler.held(key)
        steps = tuple(self.track.steps.get(key, ()))
        if key not in self.track.started:
            return Forecast(key, wl.cluster_queue, self.fork.now, None, basis=Basis.UNKNOWN, steps=steps,
                            blocked_by=self.unknown_running.get(self._root(key), ""), why=wl.pending_reason)
        at, flavors = self.track.started[key]
        return Forecast(key, wl.cluster_queue, self.fork.now, at, flavors, self.track.start_basis[key], steps,
                        self.track.costs.get(key))


def samples_for(waiting: int) -> int:
    """The samples an ensemble draws over ``waiting`` workloads: :data:`SAMPLES` up to :data:`DEEP`, half as many
    up to twice that, none deeper (the run with the mean run times alone). Each sample is a whole run ahead, and
    its CPU grows with the queue's depth: a forecast is advice, and the machine's CPU is the server's first."""
    if waiting <= DEEP:
        return SAMPLES
    return SAMPLES // 2 if waiting <= 2 * DEEP else 0


def ensemble(ahead: Lookahead, samples: int | None = None, seed: int = 0) -> dict[str, Forecast]:
    """Run ``ahead``; where a forecast rests on estimated run times, run ``samples`` copies more (by default as many
    as :func:`samples_for` the waiting workloads) with run times drawn from the finished jobs', and take for each
    such workload the run whose start is the median. One point estimate per job misjudges a start that is the sooner
    of two (Plan A freeing, DWS answering): the median of the starts does not. ``ahead`` is copied before it runs
    where an estimate can be used (some job has finished in a queue); a copy runs only where one was."""
    if samples is None:
        samples = samples_for(len(ahead.targets))
    pristine = copy.deepcopy(ahead) if samples and ahead.fork.run_times.learned else None
    point = ahead.run()
    if pristine is None or not any(f.basis is Basis.ESTIMATED for f in point.values()):
        return point
    runs: list[Lookahead] = []
    for n in range(samples):
        sample = copy.deepcopy(pristine) if n < samples - 1 else pristine
        sample.rng = random.Random(seed + n)
        sample._advance()
        runs.append(sample)
    out = {}
    for key, f in point.items():
        if f.basis is not Basis.ESTIMATED:
            out[key] = f
            continue
        # Starts in order, none last; equal ones in the order of the runs (the point's first). Only the run
        # chosen says the rest of its forecast.
        starts = sorted([(f.start is None, f.start or 0.0, 0)] + [(*run._start(key), n)
                                                                 for n, run in enumerate(runs, 1)])
        chosen = starts[(len(starts) - 1) // 2][2]
        made = f if chosen == 0 else runs[chosen - 1]._forecast(key)
        likely = None if starts[-1][0] else (starts[0][1], starts[-1][1])  # where every run foresaw a start
        out[key] = dataclasses.replace(made, likely=likely)
    return out


def forecast(plane: ControlPlane, now: float, horizon: float = HORIZON,
             extra: Iterable[tuple[JobQueued, float | None]] = ()) -> dict[str, Forecast]:
    """A forecast for every workload of ``plane`` whose job has not started, from ``now``: ``plane`` is copied
    (:func:`~flexq.forecast.snapshot.fork`) and left as it was. ``extra``: workloads queued in the copy only, each
    with its run time where known (what if they were submitted now?)."""
    return ensemble(Lookahead(plane, now, horizon, extra))


def flavor_lookaheads(plane: ControlPlane, now: float, queued: JobQueued, run: float | None,
                      horizon: float = HORIZON) -> list[tuple[str, Lookahead]]:
    """For each flavor ``queued``'s workload could race on (most preferred first), a fork of ``plane`` with the
    workload queued in it held to that flavor (and to the flavors its other pod sets share): where and when it would
    start there. Empty where only one flavor could hold it. Forks, so made where :class:`Lookahead` is made."""
    wl = queued.workload
    return [(plan.flavor, Lookahead(plane, now, horizon, [(dataclasses.replace(
        queued, workload=dataclasses.replace(wl, allowed=plan.allowed)), run)]))
        for plan in plane.scheduler.flavor_plans(wl)]


def under_each_flavor(plane: ControlPlane, now: float, queued: JobQueued, run: float | None,
                      horizon: float = HORIZON) -> dict[str, Forecast]:
    """Flavor -> the forecast of ``queued`` held to it (:func:`flavor_lookaheads`), each an ensemble."""
    key = queued.workload.key
    return {flavor: ensemble(ahead)[key] for flavor, ahead in flavor_lookaheads(plane, now, queued, run, horizon)}
