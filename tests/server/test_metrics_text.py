"""Kueue's histograms write their own text: byte for byte what prometheus_client writes for the same series, with the
other families around them in their order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from flexq.control import Histogram
from flexq.control.kueue_metrics import ATTEMPT_BUCKETS, WAIT_BUCKETS
from flexq.server.kueue_families import TextHistogram, exposition

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
