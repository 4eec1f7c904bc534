"""Trace files: arrivals one job a row, as CSV (a header row first) or JSON lines (``.jsonl``, ``.ndjson``).

Columns (CSV) or keys (JSON lines); empty cells and ``null`` count as absent, lines starting with ``#``
are comments:

- ``at`` (required): the arrival, ``90s``/``10m``/``2h``/``7d`` or seconds, after the entry's own ``at``;
- ``runFor``: how long the job runs once admitted (absent: until the scenario ends);
- either ``file`` (or ``template``): a job manifest, relative to the trace file, in which ``${NAME}`` is
  replaced by the row's other columns (``JOB_ID``, ...), ``${INDEX}`` (the row's number, from 0) and the
  scenario's ``env``;
- or the job's shape, from which a ``batch/v1`` Job is made: ``queue`` (a LocalQueue: the
  ``kueue.x-k8s.io/queue-name`` label), ``namespace`` (``default``), ``name`` (``<trace name>-<INDEX>``),
  requests per pod ``cpu``, ``memory``, ``tpu`` (``google.com/tpu``), ``gpu`` (``nvidia.com/gpu``) or any
  resource name with a ``/``, ``count`` or ``pods`` (parallelism, default 1), ``priority`` (a
  WorkloadPriorityClass: the ``kueue.x-k8s.io/priority-class`` label), ``nodeSelector``
  (``key=value;key=value``, or an object in JSON). Pods that request TPUs or GPUs tolerate the
  ``google.com/tpu`` / ``nvidia.com/gpu`` taints, as GKE adds for them.

Errors name the trace file, the line, and the column (CSV) or key (JSON).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from flexq.api import Document, InputError, QuantityError, find_placeholders, load_documents, parse_quantity, substitute
from flexq.api.models import check_dns_label, check_label_value, check_qualified_name
from flexq.durations import DurationError
from flexq.sim.arrivals import ScenarioError, Submission, read_text, seconds

__all__ = ["TRACE_SUFFIXES", "load_trace"]

TRACE_SUFFIXES: Final = (".csv", ".jsonl", ".ndjson")

_TIMES: Final = ("at", "runFor")
_TEMPLATE: Final = ("file", "template")
_RESOURCES: Final = {"cpu": "cpu", "memory": "memory", "tpu": "google.com/tpu", "gpu": "nvidia.com/gpu"}
_SHAPE: Final = ("queue", "namespace", "name", "count", "pods", "priority", "nodeSelector", *_RESOURCES)
_TOLERATED: Final = ("google.com/tpu", "nvidia.com/gpu")
_SEPARATOR: Final = re.compile(r"[;,]")


@dataclass(frozen=True, slots=True)
class _Row:
    line: int
    values: dict[str, Any]


def load_trace(path: Path, source: str, env: Mapping[str, str], offset: float = 0.0) -> list[Submission]:
    """Every row of the trace at ``path`` as a submission, ``offset`` seconds later than written.

    ``source`` is where the trace is named (the scenario file and line), for a trace that cannot be read.
    """
    text = read_text(path, source)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows = _csv_rows(text, str(path))
    elif suffix in (".jsonl", ".ndjson"):
        rows = _json_rows(text, str(path))
    else:
        raise ScenarioError(source, f"{path}: a trace file ends in .csv, .jsonl or .ndjson")
    reader = _Reader(path, "column" if suffix == ".csv" else "key", env)
    return [reader.submission(index, row, offset) for index, row in enumerate(rows)]


def _csv_rows(text: str, source: str) -> list[_Row]:
    lines = ["\n" if line.lstrip().startswith("#") else line for line in text.splitlines(keepends=True)]
    reader = csv.reader(lines)
    header: list[str] | None = None
    rows: list[_Row] = []
    try:
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue
            if header is None:
                header = [cell.strip() for cell in cells]
                _check_header(header, source, reader.line_num)
                continue
            if len(cells) > len(header):
                raise ScenarioError(source, f"{len(cells)} cells, but the header names {len(header)} columns",
                                    reader.line_num)
            values = {name: cell.strip() for name, cell in zip(header, cells, strict=False) if cell.strip()}
            rows.append(_Row(reader.line_num, values))
    except csv.Error as exc:
        raise ScenarioError(source, f"malformed CSV: {exc}", reader.line_num) from None
    if header is None:
        raise ScenarioError(source, "empty trace: expected a header row (at,runFor,queue,cpu,...)")
    return rows


def _check_header(header: list[str], source: str, line: int) -> None:
    seen: set[str] = set()
    for number, name in enumerate(header, start=1):
        if not name:
            raise ScenarioError(source, f"header: column {number} has no name", line)
        if name in seen:
            raise ScenarioError(source, f"header: column {name!r} appears twice", line)
        seen.add(name)
    if "at" not in seen:
        raise ScenarioError(source, "header: no 'at' column (the arrival time of each job)", line)


def _json_rows(text: str, source: str) -> list[_Row]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ScenarioError(source, f"malformed JSON at column {exc.colno}: {exc.msg}", number) from None
        if not isinstance(obj, dict):
            raise ScenarioError(source, f"expected a JSON object, got {type(obj).__name__}", number)
        rows.append(_Row(number, {str(k): v for k, v in obj.items() if v is not None and v != ""}))
    return rows


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


class _Reader:
    def __init__(self, path: Path, field: str, env: Mapping[str, str]) -> None:
        self.path = path
        self.source = str(path)
        self.field = field
        self.env = dict(env)
        self.stem = re.sub(r"[^a-z0-9-]+", "-", path.stem.lower()).strip("-")[:40].strip("-") or "trace"
        self.templates: dict[Path, str] = {}

    def fail(self, row: _Row, key: str, message: str) -> ScenarioError:
        return ScenarioError(self.source, f"{self.field} {key!r}: {message}", row.line)

    def submission(self, index: int, row: _Row, offset: float) -> Submission:
        values = row.values
        if "at" not in values:
            raise ScenarioError(self.source, f"no {self.field} 'at' (the arrival time of the job)", row.line)
        at = self._duration(row, "at")
        run_for = self._duration(row, "runFor") if "runFor" in values else None
        given = [k for k in _TEMPLATE if k in values]
        if len(given) > 1:
            raise self.fail(row, "template", "give file or template, not both")
        if given:
            doc = self._from_template(index, row, given[0])
        else:
            doc = self._job(index, row)
        return Submission(at + offset, doc, run_for)

    def _duration(self, row: _Row, key: str) -> float:
        value = row.values[key]
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(row, key, f"expected a duration such as 90s, 10m, 2h, 7d or seconds, got {value!r}")
        try:
            return seconds(value)
        except DurationError as exc:
            raise self.fail(row, key, str(exc)) from None

    def _from_template(self, index: int, row: _Row, key: str) -> Document:
        name = row.values[key]
        if not isinstance(name, str):
            raise self.fail(row, key, f"expected a file name, got {name!r}")
        path = self.path.parent / name
        text = self.templates.get(path)
        if text is None:
            try:
                text = read_text(path, self.source)
            except InputError as exc:
                raise self.fail(row, key, exc.message) from None
            self.templates[path] = text
        values = {**self.env, **{k: _text(v) for k, v in row.values.items() if k not in (*_TIMES, *_TEMPLATE)},
                  "INDEX": str(index)}
        text = substitute(text, values)
        unresolved = find_placeholders(text)
        if unresolved:
            listed = ", ".join(f"${{{p.name}}} (line {p.line})" for p in unresolved)
            raise self.fail(row, key, f"{path}: unresolved placeholders: {listed}; add a {self.field} for each")
        try:
            docs = load_documents(text, str(path))
        except InputError as exc:
            raise self.fail(row, key, str(exc)) from None
        if len(docs) != 1:
            raise self.fail(row, key, f"{path}: expected one job, found {len(docs)} documents")
        return docs[0]

    def _job(self, index: int, row: _Row) -> Document:
        values = row.values
        for key in values:
            if key not in _TIMES and key not in _SHAPE and "/" not in key:
                raise self.fail(row, key, "unknown; a row without file or template takes " + ", ".join(_SHAPE)
                                + " and resource names such as example.com/fpga")
        name = self._name(row, "name", check_dns_label, f"{self.stem}-{index}")
        namespace = self._name(row, "namespace", check_dns_label, "default")
        labels = {}
        for key, label in (("queue", "kueue.x-k8s.io/queue-name"), ("priority", "kueue.x-k8s.io/priority-class")):
            if key in values:
                labels[label] = self._name(row, key, check_label_value, "")
        if "count" in values and "pods" in values:
            raise self.fail(row, "pods", "give count or pods, not both")
        pods = self._pods(row, "pods" if "pods" in values else "count") if {"count", "pods"} & set(values) else 1
        requests: dict[str, str | int] = {}
        for key, value in values.items():
            resource = _RESOURCES.get(key) or (key if "/" in key else None)
            if resource is None:
                continue
            if resource in requests:
                raise self.fail(row, key, f"{resource} is given twice")
            requests[resource] = self._quantity(row, key, value)
        if not requests:
            raise ScenarioError(self.source, f"no resources: give {self.field}s cpu, memory, tpu, gpu (per pod), "
                                f"or a file (a job manifest)", row.line)
        pod: dict[str, Any] = {"restartPolicy": "Never",
                               "containers": [{"name": "main", "image": "pause", "resources": {"requests": requests}}]}
        if "nodeSelector" in values:
            pod["nodeSelector"] = self._selector(row, values["nodeSelector"])
        tolerated = [r for r in _TOLERATED if r in requests]
        if tolerated:
            pod["tolerations"] = [{"key": r, "operator": "Exists", "effect": "NoSchedule"} for r in tolerated]
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "namespace": namespace, **({"labels": labels} if labels else {})},
               "spec": {"parallelism": pods, "completions": pods, "template": {"spec": pod}}}
        return Document(job, self.source, index, row.line, {})

    def _name(self, row: _Row, key: str, check: Any, default: str) -> str:
        value = row.values.get(key, default)
        if not isinstance(value, str):
            raise self.fail(row, key, f"expected text, got {value!r}")
        try:
            check(value)
        except ValueError as exc:
            raise self.fail(row, key, str(exc)) from None
        return value

    def _pods(self, row: _Row, key: str) -> int:
        value = row.values[key]
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            pods = int(value)
        except (TypeError, ValueError):
            raise self.fail(row, key, f"expected a whole number of pods, got {value!r}") from None
        if pods < 1:
            raise self.fail(row, key, f"expected at least 1 pod, got {pods}")
        return pods

    def _quantity(self, row: _Row, key: str, value: Any) -> str | int:
        try:
            quantity = parse_quantity(value)
        except QuantityError as exc:
            raise self.fail(row, key, str(exc)) from None
        if quantity.value < 0:
            raise self.fail(row, key, f"invalid quantity {_text(value)!r}: must not be negative")
        return quantity.to_json()

    def _selector(self, row: _Row, value: Any) -> dict[str, str]:
        if isinstance(value, str):
            pairs: list[tuple[str, Any]] = []
            for part in _SEPARATOR.split(value):
                if not part.strip():
                    continue
                key, eq, label = part.partition("=")
                if not eq:
                    raise self.fail(row, "nodeSelector", f"expected key=value pairs separated by ';', got {part!r}")
                pairs.append((key.strip(), label.strip()))
        elif isinstance(value, dict):
            pairs = list(value.items())
        else:
            raise self.fail(row, "nodeSelector", f"expected key=value;key=value or an object, got {value!r}")
        selector = {}
        for key, label in pairs:
            if not isinstance(label, str):
                raise self.fail(row, "nodeSelector", f"{key}: expected a text value, got {label!r}")
            try:
                check_qualified_name(key)
                check_label_value(label)
            except ValueError as exc:
                raise self.fail(row, "nodeSelector", str(exc)) from None
            selector[key] = label
        return selector
