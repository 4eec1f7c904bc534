"""Kueue's metric families write their own text: byte for byte what prometheus_client writes for the same series, with
the other families around them in their order, in pieces for a response sent as it is written; and what a scrape reads
is a copy the controller's counting does not change."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from flexq.control import Histogram, KueueCounts
from flexq.control.kueue_metrics import ATTEMPT_BUCKETS, WAIT_BUCKETS
from flexq.server import kueue_families
from flexq.server.kueue_families import TextFamily, TextHistogram, exposition, exposition_chunks, go_float

Series = list[tuple[Sequence[str], Histogram]]


def _observed(bounds: tuple[float, ...], *values: float) -> Histogram:
    histogram = Histogram(bounds)
    for value in values:
        histogram.observe(value)
    return histogram


# (label names, series) -> written as prometheus_client writes them
CASES: dict[str, tuple[list[str], Series]] = {
    "queues and priorities": (["cluster_queue", "priority_class"], [
        (("cq-a", "high"), _observed(WAIT_BUCKETS, 0.5, 3.0, 7.25)),
        (("cq-b", ""), _observed(WAIT_BUCKETS))]),
    "label names around le, unsorted": (["zone", "app", "replica_role"], [
        (("z", "a", "standalone"), _observed(ATTEMPT_BUCKETS, 0.001, 11.0))]),
    "values to escape": (["cluster_queue"], [
        (('a "quoted"\\ back\nslash é',), _observed(WAIT_BUCKETS, 2.0))]),
    "Go's floats: tiny, huge, whole": (["cluster_queue"], [
        (("cq",), _observed(WAIT_BUCKETS, 1e-9, 123456789.5, 7e7, 40960.0))]),
    "no labels": ([], [((), _observed(ATTEMPT_BUCKETS, 0.2))]),
    "no series": (["cluster_queue"], []),
}


class _Given(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def _as_prometheus_client_writes(families: list[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Given(families))
    return generate_latest(registry)


def _counter(name: str) -> Metric:
    family = CounterMetricFamily(name, "a counter", labels=["cluster_queue"])
    family.add_metric(["cq"], 3)
    return family


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_histogram_is_written_as_prometheus_client_writes_it(case: str) -> None:
    labels, series = CASES[case]
    doc = 'waits \\ in seconds\n"of each"'
    expected = HistogramMetricFamily("kueue_t", doc, labels=labels)
    for values, observed in series:
        expected.add_metric(list(values), observed.cumulative(), observed.total)
    ours = TextHistogram("kueue_t", doc, labels, [(values, h.cumulative(), h.total) for values, h in series])
    # Between other families: each in its place.
    written = exposition([_counter("kueue_before"), ours, _counter("kueue_after")])
    assert written == _as_prometheus_client_writes([_counter("kueue_before"), expected, _counter("kueue_after")])
    assert written.count(b"# TYPE kueue_t histogram\n") == 1


# Values as prometheus_client writes them: whole counts (written directly below a million) and floats (through its own
# function) on both sides of each boundary.
GO_FLOATS: list[float] = [0, 1, 7, 999_999, 1_000_000, 1_000_001, 12_345_678, 2**53 + 1, -1, -5_000_000, True, 0.0, 0.5,
                          -0.25, 1e-9, 999_999.0, 1_000_000.0, 1.5e7, 123456789.5, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("value", GO_FLOATS, ids=repr)
def test_a_value_is_written_as_prometheus_client_writes_it(value: float) -> None:
    assert go_float(value) == floatToGoString(value)


# (kind, label names, series) -> written as prometheus_client's Gauge- or CounterMetricFamily writes them
FAMILIES: dict[str, tuple[str, list[str], list[tuple[Sequence[str], float]]]] = {
    "a gauge by queue and status": ("gauge", ["cluster_queue", "status"], [
        (("cq-a", "active"), 3), (("cq-a", "inadmissible"), 0), (("cq-b", "active"), 2.5)]),
    "a counter, labels unsorted": ("counter", ["zone", "app", "replica_role"], [(("z", "a", "standalone"), 12)]),
    "values to escape": ("gauge", ["cluster_queue"], [(('a "quoted"\\ back\nslash é',), 1)]),
    "no limit, no number, huge": ("gauge", ["resource"], [
        (("cpu",), math.inf), (("memory",), math.nan), (("bytes",), 68719476736.0), (("count",), 2_000_000)]),
    "no labels": ("counter", [], [((), 4)]),
    "no series": ("gauge", ["cluster_queue"], []),
}


@pytest.mark.parametrize("case", sorted(FAMILIES))
def test_a_gauge_or_counter_is_written_as_prometheus_client_writes_it(case: str) -> None:
    kind, labels, series = FAMILIES[case]
    doc = 'held \\ now\n"per queue"'
    name = "kueue_t_total" if kind == "counter" else "kueue_t"
    expected: Metric = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, doc, labels=labels)
    for values, value in series:
        expected.add_metric(list(values), value)  # type: ignore[attr-defined]
    ours = TextFamily(name, doc, kind, labels, series)
    written = exposition([_counter("kueue_before"), ours, _counter("kueue_after")])
    assert written == _as_prometheus_client_writes([_counter("kueue_before"), expected, _counter("kueue_after")])
    shown = "kueue_t_total" if kind == "counter" else "kueue_t"
    assert written.count(f"# TYPE {shown} {kind}\n".encode()) == 1


def test_a_text_family_is_a_gauge_or_a_counter() -> None:
    with pytest.raises(ValueError, match="histogram"):
        TextFamily("kueue_t", "doc", "histogram", [], [])


def test_families_are_written_in_pieces_of_so_many_series(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kueue_families, "CHUNK_SERIES", 2)
    gauge = TextFamily("kueue_g", "g", "gauge", ["cluster_queue"], [((f"cq-{n}",), n) for n in range(5)])
    histogram = TextHistogram("kueue_h", "h", ["cluster_queue"],
                              [((f"cq-{n}",), _observed(WAIT_BUCKETS, n).cumulative(), float(n)) for n in range(4)])
    families: list[Metric] = [_counter("kueue_a"), gauge, _counter("kueue_b"), _counter("kueue_c"), histogram]
    pieces = list(exposition_chunks(families))
    # The plain counters in prometheus_client's turn (one piece for the two together), each own family by two series.
    assert len(pieces) == 1 + 3 + 1 + 2
    assert pieces[1].startswith(b"# HELP kueue_g g\n") and pieces[1].count(b"\nkueue_g{") == 2
    assert pieces[3] == b'kueue_g{cluster_queue="cq-4"} 4.0\n'
    assert b"".join(pieces) == exposition(families)
    expected = GaugeMetricFamily("kueue_g", "g", labels=["cluster_queue"])
    for n in range(5):
        expected.add_metric([f"cq-{n}"], n)
    assert b"".join(pieces[:4]) == _as_prometheus_client_writes([_counter("kueue_a"), expected])


def test_a_snapshot_is_not_changed_by_counting_on() -> None:
    counts = KueueCounts()
    counts.admitted[("cq", "high")] = 2
    counts.admission_wait[("cq", "high")] = _observed(WAIT_BUCKETS, 0.5, 3.0)
    counts._ready_since["ns/wl"] = 1.0
    snapshot = counts.snapshot()
    counts.admitted[("cq", "high")] += 1
    counts.admitted[("cq", "low")] = 1
    counts.admission_wait[("cq", "high")].observe(7.0)
    assert snapshot.admitted == {("cq", "high"): 2}
    seen = snapshot.admission_wait[("cq", "high")]
    assert (seen.count, seen.total, seen.cumulative()) == (2, 3.5, _observed(WAIT_BUCKETS, 0.5, 3.0).cumulative())
    assert snapshot._ready_since == {}, "the workloads under way are not what a scrape reads"
