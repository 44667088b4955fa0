"""Metric primitives and the Prometheus text exposition: the only ``prometheus_client`` import.

Each :class:`MetricSet` owns its own registry, never the process-global default one, so several
nodes and executors embedded in one process expose separate, non-colliding metrics.

The primitives are built for hot paths that update in batches: a :class:`Counter` adds a whole
``{labels: delta}`` mapping under one lock, a :class:`Histogram` observes a list of values under
one lock, and a :class:`GaugeFamily` costs nothing until a scrape calls its function. Values are
turned into ``prometheus_client`` metric families only at scrape time.

Threading: every primitive may be updated from any thread; :meth:`MetricSet.exposition` may run
concurrently with updates and sees each primitive at one consistent instant.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Final

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric

__all__ = [
    "PREFIX",
    "RPC_BUCKETS",
    "SCHEDULING_BUCKETS",
    "Counter",
    "CounterView",
    "GaugeFamily",
    "Histogram",
    "MetricSet",
]

PREFIX: Final = "raftsched_"

SCHEDULING_BUCKETS: Final[tuple[float, ...]] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)
"""Upper bounds (seconds) for scheduling delays: 5 ms to 2 minutes. 2 s is a bound of its own
because "p99 schedule delay above 2 s" is the alert operators write."""

RPC_BUCKETS: Final[tuple[float, ...]] = (0.0005, 0.001, 0.0025, *SCHEDULING_BUCKETS)
"""Upper bounds (seconds) for request latency: most gRPC calls finish well under 5 ms."""

_NAME: Final = re.compile(r"[a-z_][a-z0-9_]*")

LabelValues = tuple[str, ...]
GaugeValues = float | Mapping[LabelValues, float]


def _check_name(name: str, labels: Sequence[str]) -> None:
    if not name.startswith(PREFIX) or not _NAME.fullmatch(name):
        raise ValueError(f"metric name {name!r}: expected {PREFIX}[a-z0-9_]*")
    for label in labels:
        if not _NAME.fullmatch(label) or label.startswith("__"):
            raise ValueError(f"metric {name}: invalid label name {label!r}")


class Counter:
    """A monotone counter family with a fixed tuple of label names.

    ``inc`` and ``add`` take label values in the order of ``labels``. Increments must be >= 0.
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        _check_name(name, labels)
        if name.endswith("_total"):
            name = name[: -len("_total")]  # the exposition appends it
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        # A counter without labels exists from the start (0), so rate() sees its first increase.
        self._values: dict[LabelValues, float] = {} if self.labels else {(): 0.0}
        self._lock = threading.Lock()

    def inc(self, *label_values: str, amount: float = 1.0) -> None:
        """Add ``amount`` to the series with these label values."""
        with self._lock:
            values = self._values
            if label_values in values:  # the hot case: an existing series, nothing to check
                values[label_values] += amount
                return
            if len(label_values) != len(self.labels):
                raise ValueError(f"{self.name}: expected labels {self.labels}, got {label_values}")
            values[label_values] = amount

    def add(self, deltas: Mapping[LabelValues, float]) -> None:
        """Add every ``{label values: amount}`` at once (one lock for a whole batch)."""
        with self._lock:
            values = self._values
            for key, amount in deltas.items():
                values[key] = values.get(key, 0.0) + amount

    def value(self, *label_values: str) -> float:
        """The current value of one series (0 if it was never incremented)."""
        with self._lock:
            return self._values.get(tuple(label_values), 0.0)

    def collect(self) -> Metric:
        with self._lock:
            items = sorted(self._values.items())
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for key, value in items:
            family.add_metric(list(key), value)
        return family


class Histogram:
    """A histogram family; observations are in seconds. ``+Inf`` is implied."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = SCHEDULING_BUCKETS,
    ) -> None:
        _check_name(name, labels)
        bounds = tuple(float(b) for b in buckets)
        if not bounds or list(bounds) != sorted(set(bounds)) or math.isinf(bounds[-1]):
            raise ValueError(f"{name}: buckets must be finite, strictly increasing and non-empty")
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        self.bounds = bounds
        # label values -> [count per bucket (non-cumulative, the last is +Inf)..., sum]
        self._series: dict[LabelValues, list[float]] = {}
        if not self.labels:
            self._series[()] = [0.0] * (len(bounds) + 2)  # exposed (all zero) from the start
        self._lock = threading.Lock()

    def observe(self, seconds: float, *label_values: str) -> None:
        """Observe one value (the per-item hot path: one lock, one bisect)."""
        with self._lock:
            series = self._series.get(label_values)
            if series is None:
                series = self._new_series(label_values)
            series[bisect.bisect_left(self.bounds, seconds)] += 1
            series[-1] += seconds

    def _new_series(self, key: LabelValues) -> list[float]:
        # Under self._lock.
        if len(key) != len(self.labels):
            raise ValueError(f"{self.name}: expected labels {self.labels}, got {key}")
        series = self._series[key] = [0.0] * (len(self.bounds) + 2)
        return series

    def observe_many(self, values: Iterable[float], *label_values: str) -> None:
        """Observe every value at once (one lock for a whole batch)."""
        bounds, n = self.bounds, len(self.bounds)
        with self._lock:
            series = self._series.get(label_values)
            if series is None:
                series = self._new_series(label_values)
            for v in values:
                # bisect_left: a value equal to a bound belongs in that bound's bucket (le).
                series[bisect.bisect_left(bounds, v)] += 1
                series[n + 1] += v

    def observe_counted(self, values: Iterable[tuple[float, int]], *label_values: str) -> None:
        """Observe ``count`` times each ``(value, count)`` (run-length encoded observations: one
        bisect per distinct value, one lock for the batch)."""
        bounds, n = self.bounds, len(self.bounds)
        with self._lock:
            series = self._series.get(label_values)
            if series is None:
                series = self._new_series(label_values)
            for v, count in values:
                series[bisect.bisect_left(bounds, v)] += count
                series[n + 1] += v * count

    def count(self, *label_values: str) -> int:
        """How many values were observed in one series."""
        with self._lock:
            series = self._series.get(tuple(label_values))
            return int(sum(series[:-1])) if series else 0

    def collect(self) -> Metric:
        with self._lock:
            items = sorted((key, list(series)) for key, series in self._series.items())
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        for key, series in items:
            cumulative = 0.0
            buckets: list[tuple[str, float]] = []
            for bound, count in zip((*self.bounds, math.inf), series[:-1], strict=True):
                cumulative += count
                buckets.append((_bound(bound), cumulative))
            family.add_metric(list(key), buckets, sum_value=series[-1])
        return family


class GaugeFamily:
    """A gauge whose value is computed at scrape time by ``read``.

    ``read`` returns one number (no labels) or ``{label values: number}``. It runs on the
    scraping thread: it must be cheap and must not block for long. If it raises, the family is
    left out of that scrape (and the error propagates to the caller of :meth:`collect`).
    """

    def __init__(
        self, name: str, documentation: str, read: Callable[[], GaugeValues], labels: Sequence[str] = ()
    ) -> None:
        _check_name(name, labels)
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        self.read = read

    def collect(self) -> Metric:
        return self.from_values(self.read())

    def from_values(self, values: GaugeValues) -> Metric:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        if isinstance(values, Mapping):
            for key, value in sorted(values.items()):
                family.add_metric(list(key), float(value))
        else:
            family.add_metric([], float(values))
        return family


class CounterView:
    """A counter whose values are kept elsewhere and read at scrape time by ``read``.

    ``read`` returns ``{label values: count}``; the counts must only grow (until the process
    restarts). Same rules for ``read`` as :class:`GaugeFamily`.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        read: Callable[[], Mapping[LabelValues, float]],
        labels: Sequence[str] = (),
    ) -> None:
        _check_name(name, labels)
        if name.endswith("_total"):
            name = name[: -len("_total")]
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        self.read = read

    def collect(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for key, value in sorted(self.read().items()):
            family.add_metric(list(key), float(value))
        return family


_Family = Counter | Histogram | GaugeFamily | CounterView


class MetricSet:
    """The metrics of one node or executor, in a registry of their own.

    ``constant_labels`` (e.g. ``{"node": "n1"}``) are added to every sample; keep them few and
    fixed (they multiply every series).
    """

    def __init__(self, constant_labels: Mapping[str, str] | None = None, process: bool = True) -> None:
        self.constant_labels = dict(constant_labels or {})
        self._families: list[_Family] = []
        self._names: set[str] = set()
        self._before_scrape: list[Callable[[], None]] = []
        self._scrape_lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        if process:
            # CPU seconds, RSS, open fds, start time of this process (read from /proc at scrape).
            ProcessCollector(namespace="raftsched", registry=self.registry)

    def _add(self, family: _Family) -> None:
        if family.name in self._names:
            raise ValueError(f"metric {family.name} defined twice")
        self._names.add(family.name)
        self._families.append(family)

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        c = Counter(name, documentation, labels)
        self._add(c)
        return c

    def histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = SCHEDULING_BUCKETS,
    ) -> Histogram:
        h = Histogram(name, documentation, labels, buckets)
        self._add(h)
        return h

    def gauge(
        self, name: str, documentation: str, read: Callable[[], GaugeValues], labels: Sequence[str] = ()
    ) -> GaugeFamily:
        g = GaugeFamily(name, documentation, read, labels)
        self._add(g)
        return g

    def counter_view(
        self,
        name: str,
        documentation: str,
        read: Callable[[], Mapping[LabelValues, float]],
        labels: Sequence[str] = (),
    ) -> CounterView:
        c = CounterView(name, documentation, read, labels)
        self._add(c)
        return c

    def describe(self) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """``(name, type, help, labels)`` of every family, in definition order, as scraped
        (counters with their ``_total``): the docs site's metric reference is generated from it."""
        out = []
        for f in self._families:
            kind = (
                "histogram"
                if isinstance(f, Histogram)
                else "gauge"
                if isinstance(f, GaugeFamily)
                else "counter"
            )
            name = f.name if kind != "counter" or f.name.endswith("_total") else f.name + "_total"
            out.append((name, kind, f.documentation, f.labels))
        return out

    def before_scrape(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` once at the start of every scrape, before any family is read (e.g. to
        take one consistent sample that several gauges then read)."""
        self._before_scrape.append(hook)

    def collect(self) -> Iterator[Metric]:
        """Every family, in definition order, with the constant labels added."""
        extra_names = list(self.constant_labels)
        extra_values = list(self.constant_labels.values())
        for family in self._families:
            metric = family.collect()
            if extra_names:
                for sample in metric.samples:
                    sample.labels.update(zip(extra_names, extra_values, strict=True))
            yield metric

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text format of every metric, and its content type.

        Scrapes are serialised: the before-scrape hooks and the families they feed see one
        scrape at a time.
        """
        with self._scrape_lock:
            for hook in self._before_scrape:
                hook()
            # The 0.0.4 text format: every name here is a classic one, and Prometheus 2.x servers
            # (Debian's, among others) know no newer version.
            return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4


class _Collector:
    """The bridge prometheus_client's registry calls at scrape time."""

    def __init__(self, metric_set: MetricSet) -> None:
        self._set = metric_set

    def collect(self) -> Iterator[Metric]:
        return self._set.collect()


def _bound(value: float) -> str:
    if math.isinf(value):
        return "+Inf"
    return repr(float(value))
