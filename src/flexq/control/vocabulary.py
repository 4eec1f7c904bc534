"""What the clock's owner tells the control plane: one vocabulary for the live server and the simulator.

The live server hears it from the store (a job created, a check's state written, a job's status saying it ended);
the simulator from its scenario (an arrival, a check set at a moment, a job's run time spent). Both say it to the
plane in these words (:meth:`~flexq.control.plane.ControlPlane.feed`), so the plane alone decides what each means.
What the plane's user knows about the jobs
themselves (how to start one, how long it runs, when it ends) comes in once, as :class:`JobHooks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flexq.capacity import CapacityConfig
from flexq.scheduler import CheckState, PodSet, PodSetUpdate, Workload

__all__ = ["CapacityChanged", "CheckSet", "Input", "JobDeleted", "JobFinished", "JobHooks", "JobQueued", "JobResized",
           "JobStarted", "Objects", "PodsReady", "QueuesReconfigured"]

Objects = Mapping[str, list[dict[str, Any]]]
"""Configuration objects by kind (ClusterQueues, ResourceFlavors, LocalQueues, ...), as stored."""


@dataclass(frozen=True, slots=True)
class JobQueued:
    """A job's workload enters its queue (or, holding quota already, is restored as it was)."""

    workload: Workload
    at: float


@dataclass(frozen=True, slots=True)
class JobResized:
    """An elastic job's pod counts changed in place (shrunk, or not admitted yet)."""

    key: str
    pod_sets: tuple[PodSet, ...]
    at: float


@dataclass(frozen=True, slots=True)
class CheckSet:
    """An admission check's state for a workload, as its controller (or a person) reports it."""

    key: str
    check: str
    state: CheckState
    at: float
    message: str = ""
    pod_set_updates: Mapping[str, PodSetUpdate] | None = None
    """Kueue's ``podSetUpdates`` of a Ready check, by pod set."""


@dataclass(frozen=True, slots=True)
class JobFinished:
    """A workload's job ended: ``message`` says how, ``outcome`` (Succeeded or Failed) where it is known."""

    key: str
    at: float
    message: str = "JobFinished"
    outcome: str | None = None


@dataclass(frozen=True, slots=True)
class JobDeleted:
    """A workload (or its job) was deleted: its quota is freed."""

    key: str
    at: float


@dataclass(frozen=True, slots=True)
class JobStarted:
    """A workload's job began to run (live: its Ray job reported running), later than its pods were placed or its
    admission written: its run, and the run time learned when it ends, count from here."""

    key: str
    at: float


@dataclass(frozen=True, slots=True)
class PodsReady:
    """Whether all of an admitted workload's pods are ready (Kueue's ``PodsReady`` condition): live, its runtime says
    so (a RayJob's Ray cluster up with all its worker slices, a Pod's process started); the simulator, when the job
    starts, or as its scenario says. ``ready`` False: a running workload lost a pod (it waits for recovery)."""

    key: str
    at: float
    ready: bool = True


@dataclass(frozen=True, slots=True)
class QueuesReconfigured:
    """The queues, flavors, checks and priority classes as they now are, and the capacity modelled with them (None:
    none)."""

    objects: Objects
    capacity: CapacityConfig | None
    at: float


@dataclass(frozen=True, slots=True)
class CapacityChanged:
    """The capacity modelled is now ``capacity`` (a pool added or resized, the cloud's machines): the nodes of the
    pools that remain are kept, and what waits for capacity asks again."""

    capacity: CapacityConfig
    at: float


Input = (JobQueued | JobResized | CheckSet | JobStarted | PodsReady | JobFinished | JobDeleted | QueuesReconfigured
         | CapacityChanged)
"""What the plane may be told."""


def _unknown(_key: str) -> float | None:
    return None


def _unwatched(_key: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class JobHooks:
    """What the plane's user does and knows about jobs, given when the plane is made.

    ``start``: run a workload's job (its pods placed; without capacity modelled, on its admission where the plane is
    told to). ``run_time``: how long a workload runs once started, when known (the simulator's ``runFor``; live, the
    job's ``flexq.dev/expected-run-time``). ``finish_eta``: when a running workload will finish, where the user
    knows (the simulator); None: the capacity driver estimates it from the run time. ``watches_pods``: whether the
    user sees a workload's pods stop and start being ready itself (a live job whose runtime reports them); where it
    does not (the simulator, a live job nothing here runs), the pods on a node lost while the workload waits for its
    replacement are not ready until they are bound again, as the capacity driver says."""

    start: Callable[[str, float], None] | None = None
    run_time: Callable[[str], float | None] = _unknown
    finish_eta: Callable[[str], float | None] | None = None
    watches_pods: Callable[[str], bool] = _unwatched
