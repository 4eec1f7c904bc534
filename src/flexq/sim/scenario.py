"""Scenarios: queue configuration, arrivals and admission-check verdicts in virtual time.

::

    apiVersion: flexq.dev/v1alpha1
    kind: Scenario
    metadata: {name: seed-two-jobs}
    spec:
      env: {ONDEMAND_NODEPOOL: on-demand-pool}   # substituted into included files and submissions
      include: [dws-tpu-queue.yaml]              # manifests, relative to the scenario file
      objects: []                                # more manifests, inline
      submit:                                    # arrivals
        - at: 0s                                 # 90s, 10m, 2h, 7d
          file: rayjob-tpu-v6e-dws.yaml          # or object: {...}
          env: {JOB_ID: "1"}
          runFor: 10m                            # how long it runs once admitted (default: until the end),
                                                 #   or {exponential: MEAN}, {uniform: [LOW, HIGH]}
          count: 1                               # extension: this many copies, ``every`` apart,
          every: 0s                              #   ${INDEX} (0, 1, ...) substituted in each
          poisson: {ratePerHour: 2, for: 7d}     # or random arrivals from ``at`` on (seeded), instead of count
        - {trace: jobs.csv, at: 0s}              # a trace file: one job a row (flexq.sim.traces)
        - {generator: generator.yaml, at: 0s}    # a Kueue scheduler-performance generator config: its
                                                 #   queues join the objects, its workloads arrive (flexq.sim.generator)
      checks:                                    # admission-check verdicts by hand
        - {at: 5m, workload: default/rayjob-tpu-v6e-dws-2, check: dws-prov, state: Ready}
      capacity:                                  # node pools and the emulated cloud (CapacitySection)
        cloud:
          on-demand-pool:                        # a pool or a machine type
            outages: {meanTimeBetween: 2d, meanDuration: 4h, seed: 1}   # random stock-outs
      until: 1d                                  # stop then (default: when nothing is left to happen)
      seed: 0                                    # extension: seeds the uids of created objects

A check's ``workload`` names the workload or the job that made it (``namespace/name``). A Ready one may carry
Kueue's ``podSetUpdates`` (``[{name: POD_SET, nodeSelector: {...}, tolerations: [...], annotations: {...}}]``): a
delayed topology placement (the second pass) puts the pod set on the nodes they select and tolerate.

Random ``outages`` become stock-out windows: from ``from`` (default 0) on, alternately an up time
(exponential, mean ``meanTimeBetween``) and an outage (exponential, mean ``meanDuration``), until ``for``
after ``from`` or else ``spec.until``; ``seed`` (default: the capacity's ``seed``) and the pool's key fix
the draw. They add to the pool's ``stockouts``.

A Kueue generator config can also be simulated by itself: ``flexq simulate generator.yaml`` (a YAML
mapping with ``cohorts`` and no ``apiVersion``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flexq.api import (
    Document,
    InvalidObject,
    KueueConfig,
    kueue_config_of,
    load_documents,
    load_kueue_config,
    schema_errors,
)
from flexq.capacity import (
    CapacityConfig,
    CapacitySpec,
    EmulatedCloud,
    NodePoolSpec,
    UnknownMachineType,
    machine_type,
    random_outages,
)
from flexq.durations import DurationError, parse_duration
from flexq.scheduler import Taint
from flexq.sim.arrivals import ScenarioError, Submission, read_text
from flexq.sim.generator import is_generator, load_generator
from flexq.sim.scenario_schema import (
    CapacitySection,
    Outages,
    ScenarioFile,
    StrictModel,
)
from flexq.sim.submit import Check, Reader
from flexq.sim.submit import delay as _delay
from flexq.sim.submit import duration as _duration

__all__ = ["CapacityConfig", "Check", "Scenario", "ScenarioError", "Submission", "load_capacity", "load_scenario",
           "parse_capacity"]

@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    source: str
    objects: tuple[Document, ...]
    submissions: tuple[Submission, ...]
    checks: tuple[Check, ...]
    until: float | None
    seed: int
    capacity: CapacityConfig | None = None
    kueue: KueueConfig | None = None
    """Kueue's Configuration (``spec.kueueConfig``); None: Kueue v0.19's defaults."""


_read = read_text


def load_scenario(path: Path) -> Scenario:
    """Read and check a scenario file and everything it includes."""
    source = str(path)
    docs = load_documents(_read(path, source), source)
    if len(docs) == 1 and is_generator(docs[0].obj):
        made, generated = load_generator(docs[0])
        return Scenario(path.stem, source, tuple(made), tuple(generated), (), None, 0)
    if len(docs) != 1:
        raise ScenarioError(source, f"expected one Scenario document, found {len(docs)}")
    doc = docs[0]
    errors = schema_errors(ScenarioFile, doc)
    if errors:
        raise InvalidObject(source, 0, "Scenario", str((doc.obj.get("metadata") or {}).get("name", "")), errors)
    spec = ScenarioFile.model_validate(doc.obj).spec
    reading = Reader(source, doc, path.parent, dict(spec.env or {}), spec.seed)
    objects = reading.included(spec)
    submissions: list[Submission] = []
    for i, entry in enumerate(spec.submit or []):
        submissions.extend(reading.submissions(i, entry, objects))
    checks = reading.checks(spec)
    until = _duration(spec.until, doc, "spec.until") if spec.until is not None else None
    name = str((doc.obj.get("metadata") or {}).get("name", path.stem))
    capacity = _capacity(spec.capacity, doc, until=until) if spec.capacity is not None else None
    return Scenario(name, source, tuple(objects), tuple(submissions), checks, until, spec.seed, capacity,
                    _kueue_config(spec.kueueConfig, doc, path.parent))


def _kueue_config(raw: dict[str, Any] | str | None, doc: Document, base: Path) -> KueueConfig | None:
    """``spec.kueueConfig``: Kueue's Configuration inline, or the path of its file (relative to the scenario)."""
    if raw is None:
        return None
    if isinstance(raw, dict):
        return kueue_config_of(doc, "spec.kueueConfig")
    path = base / raw
    if not path.is_file():
        raise ScenarioError(doc.source, f"spec.kueueConfig: {path}: no such file", doc.line_of("spec.kueueConfig"))
    return load_kueue_config(path)


def _trace_file(path: Path, source: str) -> tuple[tuple[float, int], ...]:
    """A capacity trace: CSV lines ``time,available`` (time as 90s/10m/2h/7d or seconds; ``#`` comments)."""
    points = []
    text = _read(path, source)
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line or line.lower().startswith("time"):
            continue
        parts = [p.strip() for p in line.split(",")]
        try:
            if len(parts) != 2:
                raise ValueError("expected time,available")
            points.append((parse_duration(parts[0]), int(parts[1])))
        except (ValueError, DurationError) as exc:
            raise ScenarioError(str(path), f"capacity trace: {exc}", number) from None
    return tuple(points)


def _outages(raw: Outages, doc: Document, where: str, key: str, seed: int,
             until: float | None) -> tuple[tuple[float, float], ...]:
    start = _duration(raw.from_, doc, f"{where}.from")
    if raw.for_ is not None:
        end = start + _duration(raw.for_, doc, f"{where}.for")
    elif until is not None:
        end = until
    else:
        raise ScenarioError(doc.source, f"{where}: random outages need an end: give for: (e.g. 30d), "
                            "or the scenario's until", doc.line_of(where))
    between = _duration(raw.meanTimeBetween, doc, f"{where}.meanTimeBetween")
    duration = _duration(raw.meanDuration, doc, f"{where}.meanDuration")
    for name, value in (("meanTimeBetween", between), ("meanDuration", duration)):
        if value <= 0:
            raise ScenarioError(doc.source, f"{where}.{name}: must be more than 0", doc.line_of(f"{where}.{name}"))
    return random_outages(between, duration, start, end, f"{raw.seed if raw.seed is not None else seed}:{key}")


def _capacity(raw: CapacitySection, doc: Document, base: str = "spec.capacity", until: float | None = None) \
        -> CapacityConfig:
    pools = []
    for i, p in enumerate(raw.pools or []):
        where = f"{base}.pools[{i}]"
        try:
            machine = machine_type(p.machineType)
        except UnknownMachineType as exc:
            raise ScenarioError(doc.source, f"{where}.machineType: {exc}", doc.line_of(f"{where}.machineType")) \
                from None
        pool = NodePoolSpec(p.name, machine, p.tpuTopology, p.minNodes, p.maxNodes, p.numNodes, p.autoscaling,
                            p.flexStart, p.queuedProvisioning,
                            max_run_seconds=_duration(p.maxRunDuration, doc, f"{where}.maxRunDuration")
                            if p.maxRunDuration is not None else None,
                            price=p.pricePerHour)
        try:
            problems = pool.check()
        except ValueError as exc:
            problems = [str(exc)]
        if problems:
            raise ScenarioError(doc.source, f"{where}: " + "; ".join(problems), doc.line_of(where))
        pools.append(pool)
    specs = {}
    for key, c in (raw.cloud or {}).items():
        where = f"{base}.cloud.{key}"
        specs[key] = CapacitySpec(
            available=None if c.available == "unlimited" else int(c.available),
            stockouts=tuple((_duration(w.from_, doc, f"{where}.stockouts"), _duration(w.to, doc, f"{where}.stockouts"))
                            for w in c.stockouts or [])
            + (_outages(c.outages, doc, f"{where}.outages", key, raw.seed, until) if c.outages else ()),
            trace=tuple((_duration(t.at, doc, f"{where}.trace"), t.available) for t in c.trace or [])
            + (_trace_file(Path(doc.source).parent / c.traceFile, f"{doc.source}:{doc.line_of(where)}")
               if c.traceFile else ()),
            boot=_duration(c.bootTime, doc, f"{where}.bootTime") if c.bootTime is not None else None,
            queued_delay=_delay(c.queuedDelay, doc, f"{where}.queuedDelay"),
            queued_trace=tuple((_duration(p.at, doc, f"{where}.queuedDelayTrace"),
                                None if p.delay == "never" else _duration(p.delay, doc, f"{where}.queuedDelayTrace"))
                               for p in c.queuedDelayTrace or []),
            revoke_after=_duration(c.revokeAfter, doc, f"{where}.revokeAfter") if c.revokeAfter is not None else None,
            host_failures=tuple(_duration(t, doc, f"{where}.hostFailures") for t in c.hostFailures or []),
            host_not_ready=tuple((_duration(d.at, doc, f"{where}.hostNotReady"),
                                  None if d.for_ is None else _duration(d.for_, doc, f"{where}.hostNotReady"))
                                 for d in c.hostNotReady or []),
            host_taints=tuple((_duration(t.at, doc, f"{where}.hostTaints"),
                               None if t.for_ is None else _duration(t.for_, doc, f"{where}.hostTaints"),
                               Taint(t.key, t.value, t.effect)) for t in c.hostTaints or []),
        )
    return CapacityConfig(
        tuple(pools), EmulatedCloud(specs, raw.seed),
        provisioning_timeout=_duration(raw.provisioningTimeout, doc, f"{base}.provisioningTimeout"),
        fallback=raw.fallback,
        fallback_cooldown=_duration(raw.fallbackCooldown, doc, f"{base}.fallbackCooldown"),
        scale_down_after=_duration(raw.scaleDownAfter, doc, f"{base}.scaleDownAfter"),
    )



def load_capacity(path: Path) -> CapacityConfig:
    """A capacity file for the live server: the format of a scenario's ``spec.capacity``."""
    return parse_capacity(_read(path, str(path)), str(path))


def parse_capacity(text: str, source: str) -> CapacityConfig:
    """The text of a capacity file (from ``source``, for messages)."""
    docs = load_documents(text, source)
    if len(docs) != 1:
        raise ScenarioError(source, "expected one YAML document (the format of a scenario's spec.capacity)")
    doc = Document({"capacity": docs[0].obj}, source, 0, docs[0].line,
                   {f"capacity.{k}" if k else "capacity": v for k, v in docs[0].lines.items()})

    class _File(StrictModel):
        capacity: CapacitySection

    errors = schema_errors(_File, doc)
    if errors:
        raise InvalidObject(source, 0, "capacity", "", errors)
    return _capacity(_File.model_validate(doc.obj).capacity, doc, "capacity")
