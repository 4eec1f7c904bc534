"""A scenario's submissions and checks: durations, distributions, and the jobs each ``spec.submit`` entry
submits at its arrival times."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flexq.api import Document, load_documents, substitute
from flexq.durations import DurationError, parse_duration
from flexq.scheduler import PodSetUpdate, pod_set_updates
from flexq.sim.arrivals import ScenarioError, Submission, fill, read_text
from flexq.sim.generator import load_generator_file
from flexq.sim.traces import load_trace

if TYPE_CHECKING:
    from flexq.sim.scenario_schema import ScenarioSpec, SubmitEntry

__all__ = ["Check", "Reader", "delay", "duration", "run_for"]


@dataclass(frozen=True, slots=True)
class Check:
    """An admission check's state to set on a workload at a virtual time (``spec.checks``)."""

    at: float
    workload: str
    check: str
    state: str
    message: str
    pod_set_updates: Mapping[str, PodSetUpdate] | None = None
    """Kueue's ``podSetUpdates`` of a Ready check, by pod set (``spec.checks[].podSetUpdates``)."""


def duration(value: Any, doc: Document, path: str) -> float:
    """A duration field in seconds; a ScenarioError naming the field and its line for anything else."""
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ScenarioError(doc.source, f"{path}: {exc}", doc.line_of(path)) from None


def run_for(value: Any, doc: Document, path: str) -> Callable[[random.Random], float | None]:
    """How long each copy runs: a duration, ``{exponential: MEAN}`` or ``{uniform: [LOW, HIGH]}`` (seeded)."""
    if value is None:
        return lambda _rng: None
    if isinstance(value, dict):
        spec = delay(value, doc, path)
        if spec[0] == "exponential":
            mean = float(spec[1])
            return lambda rng: round(rng.expovariate(1.0 / mean), 3)
        low, high = float(spec[1]), float(spec[2])
        return lambda rng: round(rng.uniform(low, high), 3)
    fixed = duration(value, doc, path)
    return lambda _rng: fixed


def delay(value: Any, doc: Document, path: str) -> Any:
    """A delay: seconds, None for ``never``, or ``("exponential", MEAN)`` / ``("uniform", LOW, HIGH)``."""
    if value == "never":
        return None
    if isinstance(value, dict):
        if set(value) == {"exponential"}:
            return ("exponential", duration(value["exponential"], doc, f"{path}.exponential"))
        if set(value) == {"uniform"} and isinstance(value["uniform"], list) and len(value["uniform"]) == 2:
            low, high = (duration(v, doc, f"{path}.uniform") for v in value["uniform"])
            return ("uniform", low, high)
        raise ScenarioError(doc.source, f"{path}: expected a duration, never, {{exponential: MEAN}} or "
                            "{uniform: [LOW, HIGH]}", doc.line_of(path))
    return duration(value, doc, path)


@dataclass(frozen=True, slots=True)
class Reader:
    """One scenario document being read: where it is, its ``spec.env`` and its seed."""

    source: str
    doc: Document
    base: Path
    env: dict[str, str]
    seed: int

    def included(self, spec: ScenarioSpec) -> list[Document]:
        """The objects of ``spec.include`` files (with ``spec.env`` filled in), then of ``spec.objects``."""
        objects: list[Document] = []
        for i, name in enumerate(spec.include or []):
            included = self.base / name
            text = fill(read_text(included, f"{self.source}:{self.doc.line_of(f'spec.include[{i}]')}"), self.env,
                         str(included))
            objects.extend(load_documents(text, str(included)))
        for i, obj in enumerate(spec.objects or []):
            where = f"spec.objects[{i}]"
            objects.append(Document(obj, self.source, i, self.doc.line_of(where) or 1, self._lines_under(where)))
        return objects

    def _lines_under(self, prefix: str) -> dict[str, int]:
        """The lines of the scenario's fields under ``prefix``, as paths within the object there (for its errors)."""
        return {k[len(prefix) + 1:]: v for k, v in self.doc.lines.items()
                if k.startswith(prefix + ".") or k.startswith(prefix + "[")}

    def submissions(self, i: int, entry: SubmitEntry, objects: list[Document]) -> list[Submission]:
        """``spec.submit[i]``: its jobs at their arrival times; a generator's objects are added to ``objects``."""
        where = f"spec.submit[{i}]"
        start = duration(entry.at, self.doc, f"{where}.at")
        every = duration(entry.every, self.doc, f"{where}.every")
        rng = random.Random(f"{self.seed}:{i}")
        runs_for = run_for(entry.runFor, self.doc, f"{where}.runFor")
        ready_after = None if entry.podsReadyAfter == "never" else \
            duration(entry.podsReadyAfter, self.doc, f"{where}.podsReadyAfter")
        sources = [k for k in ("file", "object", "trace", "generator") if getattr(entry, k) is not None]
        if len(sources) != 1:
            raise ScenarioError(self.source, f"{where}: give exactly one of file, object, trace or generator",
                                self.doc.line_of(where))
        if entry.trace is not None or entry.generator is not None:
            return self._external(where, entry, sources[0], start, objects)
        out = []
        for n, arrival in enumerate(self._arrivals(where, entry, start, every, rng)):
            values = {**self.env, **(entry.env or {}), "INDEX": str(n)}
            values = {k: substitute(v, values) for k, v in values.items()}
            out.append(Submission(arrival, self._job(i, where, entry, values), runs_for(rng), ready_after))
        return out

    def _external(self, where: str, entry: SubmitEntry, kind: str, start: float,
                  objects: list[Document]) -> list[Submission]:
        """A ``trace`` or ``generator`` entry: the file it names says what arrives when."""
        extra = sorted(entry.model_fields_set - {"at", kind, *(("env",) if kind == "trace" else ())})
        if extra:
            field = {"for_": "for"}.get(extra[0], extra[0])
            raise ScenarioError(self.source, f"{where}.{field}: not allowed with {kind} (the {kind} file says it)",
                                self.doc.line_of(f"{where}.{field}"))
        named = f"{self.source}:{self.doc.line_of(f'{where}.{kind}')}"
        if entry.trace is not None:
            return list(load_trace(self.base / entry.trace, named, {**self.env, **(entry.env or {})}, start))
        made, generated = load_generator_file(self.base / str(entry.generator), named, start)
        objects.extend(made)
        return list(generated)

    def _arrivals(self, where: str, entry: SubmitEntry, start: float, every: float, rng: random.Random) -> list[float]:
        """``count`` arrivals ``every`` apart from ``start``, or a Poisson process's (seeded by ``rng``)."""
        if entry.poisson is None:
            return [start + n * every for n in range(entry.count)]
        horizon = start + duration(entry.poisson.for_, self.doc, f"{where}.poisson.for")
        arrivals: list[float] = []
        t = start
        while True:
            t += rng.expovariate(entry.poisson.ratePerHour / 3600.0)
            if t >= horizon:
                return arrivals
            arrivals.append(round(t, 3))

    def _job(self, i: int, where: str, entry: SubmitEntry, values: dict[str, str]) -> Document:
        """The job an arrival submits: ``file`` or ``object``, with ``values`` filled in."""
        if entry.file is not None:
            job_file = self.base / entry.file
            text = fill(read_text(job_file, f"{self.source}:{self.doc.line_of(where)}"), values, str(job_file))
            loaded = load_documents(text, str(job_file))
            if len(loaded) != 1:
                raise ScenarioError(str(job_file), f"expected one job per submitted file, found {len(loaded)}")
            return loaded[0]
        text = fill(json.dumps(entry.object), values, f"{self.source}:{self.doc.line_of(where)}")
        return Document(json.loads(text), self.source, i, self.doc.line_of(f"{where}.object") or 1,
                        self._lines_under(f"{where}.object"))

    def checks(self, spec: ScenarioSpec) -> tuple[Check, ...]:
        """``spec.checks``: admission check states to set at given times."""
        checks = tuple(
            Check(duration(c.at, self.doc, f"spec.checks[{i}].at"), c.workload, c.check, c.state, c.message or "",
                  pod_set_updates(c.podSetUpdates) if c.podSetUpdates else None)
            for i, c in enumerate(spec.checks or []))
        for i, c in enumerate(checks):
            if "/" not in c.workload:
                raise ScenarioError(self.source, f"spec.checks[{i}].workload: expected namespace/name, got "
                                    f"{c.workload!r}", self.doc.line_of(f"spec.checks[{i}].workload"))
        return checks
