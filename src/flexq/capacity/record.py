"""One record per workload in the capacity driver: where its capacity story stands, and the timers that belong to it.

A :class:`WorkloadCapacity` is made the first time the driver hears of a workload and kept after it is released (what
it cost, and which workload a variant raced for, outlive its run). Its :class:`CapacityState` moves only through the
record's own transitions (:meth:`~WorkloadCapacity.admitted`, :meth:`~WorkloadCapacity.waits`,
:meth:`~WorkloadCapacity.bound`, :meth:`~WorkloadCapacity.released`)::

    IDLE --admitted--> WAITING --bound--> RUNNING
      ^                   |                  |
      +----released-------+------released----+

:class:`Records` holds them, with read-only views by field for the driver's readers (``running``, ``placements``,
``requests``, ...). :class:`Timeline` sets the timers of a story: a timer set before the story restarted (the
workload released) or before the driver was given a new scheduler is dropped when it comes due.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Final, NamedTuple, Protocol, TypeVar

from flexq.capacity.cluster import PodGroup

__all__ = ["CAPACITY_PRIORITY", "Billing", "CapacityState", "Records", "Request", "Timeline", "Timers",
           "WorkloadCapacity"]

CAPACITY_PRIORITY: Final = 1  # kernel priority: after finishes (0), before submissions

V = TypeVar("V")


class Timers(Protocol):
    """Time and deferred actions: the simulator's event kernel, or the live controller's timer heap."""

    def now(self) -> float: ...

    def schedule(self, at: float, action: Callable[[], None], priority: int = 0) -> None: ...


class CapacityState(Enum):
    """Where a workload's capacity story stands."""

    IDLE = "Idle"
    """Nothing asked of the nodes: not admitted yet, or released (finished, evicted, withdrawn)."""
    WAITING = "Waiting"
    """Admitted, its pods waiting for nodes (booting, unavailable, provisioned for it, or a pool to make room)."""
    RUNNING = "Running"
    """Every pod bound to a node: the job runs."""


class Request(NamedTuple):
    """The last ProvisioningRequest a workload made."""

    check: str
    name: str
    pool: str
    """The node pool it asks of ("" where none matches)."""


@dataclass(frozen=True, slots=True)
class Billing:
    """What a running workload's nodes cost since ``since``: (share of the node, USD an hour) per node."""

    since: float
    rates: tuple[tuple[float, float], ...]

    @property
    def hourly(self) -> float:
        return sum(share * hourly for share, hourly in self.rates)

    def due(self, now: float) -> float:
        return self.hourly * (now - self.since) / 3600


@dataclass(slots=True)
class WorkloadCapacity:
    """The capacity story of one workload (a racing variant has its own)."""

    key: str
    state: CapacityState = CapacityState.IDLE
    token: int = 0
    """Bumped whenever the story restarts (:meth:`released`): the timers set before are stale."""
    waiting_since: float | None = None
    """WAITING: since when its pods wait for nodes (the provisioning timeout counts from there)."""
    started_at: float | None = None
    """RUNNING: when its pods were bound."""
    placement: dict[str, list[str]] | None = None
    """RUNNING: pod set -> the nodes its pods are on."""
    groups: list[PodGroup] | None = None
    """RUNNING: its pod groups as they were bound."""
    billing: Billing | None = None
    """RUNNING: what its nodes cost by the hour."""
    spent: float | None = None
    """USD its runs before this one cost (None: it never ran nor paid for a variant's capacity)."""
    waste: float = 0.0
    """USD of capacity provisioned for its variants that lost their race (counted in ``spent`` too)."""
    request: Request | None = None
    """The ProvisioningRequest it made last (until released)."""
    attempts: dict[str, int] = field(default_factory=dict)
    """ProvisioningRequests made per check (each attempt gets a fresh name; a variant's count on its parent)."""
    failures: dict[str, int] = field(default_factory=dict)
    """ProvisioningRequests failed per check (Kueue's retries count them)."""
    raced_for: str | None = None
    """A variant: the workload it raced for, on whose story its own is told."""
    replaces: str | None = None
    """A slice replacing a running one (a growing job): the old slice, whose pods keep their nodes until this one's
    are placed (on those nodes and the ones it adds)."""

    # --- transitions --------------------------------------------------------------------------------------------

    def admitted(self, now: float) -> None:
        """Admitted: its pods wait for nodes from ``now`` (a running workload admitted again runs on)."""
        if self.state is not CapacityState.RUNNING:
            self.state = CapacityState.WAITING
            self.waiting_since = now

    def waits(self, now: float) -> float:
        """Its pods wait for nodes (if they did not already): since when."""
        if self.waiting_since is None:
            self.state = CapacityState.WAITING
            self.waiting_since = now
        return self.waiting_since

    def bound(self, now: float, groups: list[PodGroup], placement: dict[str, list[str]], billing: Billing) -> None:
        """Every pod bound: it runs from ``now``."""
        self.state = CapacityState.RUNNING
        self.waiting_since = None
        self.started_at = now
        self.groups = groups
        self.placement = placement
        self.billing = billing

    def released(self, now: float) -> None:
        """Its pods left their nodes (finished, evicted, withdrawn, deleted): what its run cost is kept, the story
        restarts (its timers are stale)."""
        self.spent = self.cost(now)
        self.state = CapacityState.IDLE
        self.token += 1
        self.waiting_since = self.started_at = self.placement = self.groups = self.billing = None
        self.request = None

    # --- reading ------------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.state is CapacityState.RUNNING

    def cost(self, now: float) -> float:
        """What it has cost so far, a run still going included."""
        return (self.spent or 0.0) + (self.billing.due(now) if self.billing is not None else 0.0)

    def charge(self, usd: float) -> None:
        """Capacity provisioned for one of its variants that lost its race: paid, and wasted."""
        self.waste += usd
        self.spent = (self.spent or 0.0) + usd


class _Running(Set[str]):
    """The workloads whose pods are bound."""

    def __init__(self, records: dict[str, WorkloadCapacity]) -> None:
        self._records = records

    def __contains__(self, key: object) -> bool:
        record = self._records.get(key) if isinstance(key, str) else None
        return record is not None and record.running

    def __iter__(self) -> Iterator[str]:
        return (key for key, record in self._records.items() if record.running)

    def __len__(self) -> int:
        return sum(1 for record in self._records.values() if record.running)


class _Field(Mapping[str, V]):
    """One field of the records, by workload, where it is set."""

    def __init__(self, records: dict[str, WorkloadCapacity], read: Callable[[WorkloadCapacity], V | None]) -> None:
        self._records = records
        self._read = read

    def __getitem__(self, key: str) -> V:
        record = self._records.get(key)
        value = self._read(record) if record is not None else None
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return (key for key, record in self._records.items() if self._read(record) is not None)

    def __len__(self) -> int:
        return sum(1 for record in self._records.values() if self._read(record) is not None)


class Records:
    """The capacity records of every workload the driver has heard of."""

    def __init__(self) -> None:
        self._by_key: dict[str, WorkloadCapacity] = {}

    def get(self, key: str) -> WorkloadCapacity | None:
        return self._by_key.get(key)

    def of(self, key: str) -> WorkloadCapacity:
        """``key``'s record, made if it has none."""
        record = self._by_key.get(key)
        if record is None:
            record = self._by_key[key] = WorkloadCapacity(key)
        return record

    def token(self, key: str) -> int:
        record = self._by_key.get(key)
        return record.token if record is not None else 0

    def values(self) -> Iterator[WorkloadCapacity]:
        return iter(self._by_key.values())

    def waiting(self) -> list[str]:
        """The admitted workloads whose pods wait for nodes, by key."""
        return sorted(key for key, record in self._by_key.items() if record.waiting_since is not None)

    # --- read-only views ------------------------------------------------------------------------------------------

    @property
    def running(self) -> Set[str]:
        return _Running(self._by_key)

    @property
    def placements(self) -> Mapping[str, dict[str, list[str]]]:
        return _Field(self._by_key, lambda r: r.placement)

    @property
    def started_at(self) -> Mapping[str, float]:
        return _Field(self._by_key, lambda r: r.started_at)

    @property
    def requests(self) -> Mapping[str, Request]:
        return _Field(self._by_key, lambda r: r.request)

    @property
    def costs(self) -> Mapping[str, float]:
        """What each workload's finished runs cost (a run going on not counted: see the driver's ``cost``)."""
        return _Field(self._by_key, lambda r: r.spent)

    @property
    def waste(self) -> Mapping[str, float]:
        return _Field(self._by_key, lambda r: r.waste or None)


class Timeline:
    """The timers of workloads' capacity stories, on ``timers``.

    Every action goes through ``run`` (the driver's own method), so that a copy of the driver (a forecast) can tell
    the timers that are the driver's from the others. :meth:`later` drops a timer whose workload's story restarted
    since it was set, or that was set before the driver was given another scheduler (:attr:`epoch`)."""

    def __init__(self, timers: Timers, records: Records, run: Callable[[Callable[[], None]], None]) -> None:
        self.timers = timers
        self.records = records
        self.run = run
        self.epoch = 0

    def now(self) -> float:
        return self.timers.now()

    def at(self, at: float, action: Callable[[], None]) -> None:
        """Run ``action`` at ``at`` (a pool's timer: no workload's story to go stale)."""
        self.timers.schedule(at, partial(self.run, action), CAPACITY_PRIORITY)

    def later(self, at: float, key: str, action: Callable[[], None]) -> None:
        """Run ``action`` at ``at`` unless ``key``'s story restarted by then."""
        token = (self.epoch, self.records.token(key))
        self.timers.schedule(at, partial(self.run, partial(self._guarded, key, token, action)), CAPACITY_PRIORITY)

    def _guarded(self, key: str, token: tuple[int, int], action: Callable[[], None]) -> None:
        if (self.epoch, self.records.token(key)) == token:
            action()
