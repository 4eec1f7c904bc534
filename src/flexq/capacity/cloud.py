"""The emulated cloud: how many machines can be had, when, how fast they boot, how long DWS takes.

Per node pool (or per machine type, for every pool of that type), a :class:`CapacitySpec` says:

- ``available``: machines obtainable at once (``None``: unlimited);
- ``stockouts``: windows ``[start, end)`` with no machines at all (:func:`random_outages` draws them
  at random, with a seed);
- ``trace``: ``[(t, n), ...]``: from ``t`` on, ``n`` machines are obtainable (replaces ``available``);
- ``boot``: seconds from creation to a ready node;
- ``queued_delay``: for queued provisioning, seconds from a ProvisioningRequest to its nodes: a fixed
  number, ``("exponential", mean)`` or ``("uniform", low, high)`` drawn with the cloud's seed per request
  name, or ``None`` for never; ``queued_trace`` ``[(t, delay or None), ...]`` overrides it from ``t`` on;
- ``revoke_after``: queued-provisioning capacity is taken back this long after it was provisioned
  (CapacityRevoked), ``None`` for never;
- ``host_failures``: moments at which a host of the pool fails (its node is lost, as with ``kubectl delete node``).
- ``host_not_ready``: (moment, for how long or None: for good) a host of the pool is NotReady;
  ``host_taints``: (moment, for how long or None, taint) a host of the pool gets a taint
  (:mod:`flexq.capacity.nodehealth`).

Everything is a pure function of time, the spec and the seed: the same scenario gets the same cloud.
Times in the specs count from ``origin``: 0 in a simulation, the server's start on the live clock.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from flexq.scheduler import Taint

__all__ = ["CapacitySpec", "EmulatedCloud", "random_outages"]

Delay = float | tuple[str, float] | tuple[str, float, float] | None


def random_outages(mean_between: float, mean_duration: float, start: float, end: float,
                   seed: int | str) -> tuple[tuple[float, float], ...]:
    """Stock-out windows ``[(from, to), ...]`` drawn from ``start`` until ``end``: alternately an up time
    (exponential, mean ``mean_between``) and an outage (exponential, mean ``mean_duration``).

    The same arguments give the same windows. Times are rounded to the millisecond; a window that begins
    before ``end`` is kept whole.
    """
    if mean_between <= 0 or mean_duration <= 0:
        raise ValueError("mean time between outages and mean duration must be positive")
    rng = random.Random(f"outages:{seed}")
    windows: list[tuple[float, float]] = []
    t = start
    while True:
        t += rng.expovariate(1.0 / mean_between)
        if t >= end:
            break
        length = rng.expovariate(1.0 / mean_duration)
        begin, t = round(t, 3), round(t + length, 3)
        if t > begin:
            windows.append((begin, t))
    return tuple(windows)


@dataclass(frozen=True, slots=True)
class CapacitySpec:
    available: int | None = None
    stockouts: tuple[tuple[float, float], ...] = ()
    trace: tuple[tuple[float, int], ...] = ()
    boot: float | None = None
    queued_delay: Delay = 0.0
    queued_trace: tuple[tuple[float, float | None], ...] = ()
    revoke_after: float | None = None
    host_failures: tuple[float, ...] = ()
    host_not_ready: tuple[tuple[float, float | None], ...] = ()
    host_taints: tuple[tuple[float, float | None, Taint], ...] = ()


@dataclass
class EmulatedCloud:
    specs: Mapping[str, CapacitySpec] = field(default_factory=dict)
    seed: int = 0
    origin: float = 0.0
    """The moment the specs' times count from."""

    def spec(self, pool: str, machine: str) -> CapacitySpec:
        return self.specs.get(pool) or self.specs.get(machine) or CapacitySpec()

    def obtainable(self, pool: str, machine: str, t: float) -> float:
        """Machines this pool can hold at ``t`` (``inf`` for unlimited)."""
        spec = self.spec(pool, machine)
        t -= self.origin
        if any(start <= t < end for start, end in spec.stockouts):
            return 0
        if spec.trace:
            level: float = math.inf
            for when, n in spec.trace:
                if when <= t:
                    level = n
            return level
        return math.inf if spec.available is None else spec.available

    def next_change(self, pool: str, machine: str, t: float) -> float | None:
        """The next moment after ``t`` at which :meth:`obtainable` may change."""
        spec = self.spec(pool, machine)
        t -= self.origin
        moments = [m for start, end in spec.stockouts for m in (start, end) if m > t]
        moments += [when for when, _ in spec.trace if when > t]
        return min(moments) + self.origin if moments else None

    def boot_seconds(self, pool: str, machine: str, default: float) -> float:
        spec = self.spec(pool, machine)
        return default if spec.boot is None else spec.boot

    def queued_delay(self, pool: str, machine: str, request: str, t: float = 0.0) -> float | None:
        """Seconds until a queued-provisioning request made at ``t`` is fulfilled (``None``: never)."""
        spec = self.spec(pool, machine)
        traced = [d for when, d in spec.queued_trace if when <= t - self.origin]
        if traced:
            return traced[-1]
        delay = spec.queued_delay
        if delay is None or isinstance(delay, int | float):
            return None if delay is None else float(delay)
        digest = hashlib.sha256(f"{self.seed}:{request}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        if delay[0] == "exponential":
            return rng.expovariate(1.0 / delay[1])
        if delay[0] == "uniform" and len(delay) == 3:
            return rng.uniform(delay[1], delay[2])
        raise ValueError(f"unknown delay distribution {delay[0]!r}")

    def foreseeable(self, answers: Mapping[tuple[str, str], float]) -> EmulatedCloud:
        """This cloud as a forecast may know it: a random queued-provisioning delay replaced by its distribution's
        median (a forecast must not draw the answer the cloud will give), and the pools of ``answers`` ((pool,
        machine) -> seconds, learned from the requests answered so far) answering after that."""
        specs = dict(self.specs)
        for name, spec in self.specs.items():
            delay = spec.queued_delay
            if isinstance(delay, tuple):
                median = delay[1] * math.log(2) if delay[0] == "exponential" else (delay[1] + delay[-1]) / 2
                specs[name] = replace(spec, queued_delay=median)
        for (pool, machine), seconds in answers.items():
            spec = specs.get(pool) or specs.get(machine) or CapacitySpec()
            specs[pool] = replace(spec, queued_delay=seconds, queued_trace=())
        return EmulatedCloud(specs, self.seed, self.origin)

    def revoke_after(self, pool: str, machine: str) -> float | None:
        return self.spec(pool, machine).revoke_after
