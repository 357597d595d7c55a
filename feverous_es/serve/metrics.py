"""The service's metrics, in Prometheus' text format at ``/metrics`` (``prometheus-client``).

Each app has a registry of its own (not the library's global one), so two apps in one process
never share counts. What is measured:

* ``feverous_es_requests_total{route, method, status}``, ``feverous_es_request_seconds{route}``:
  every request, by its route template (``unmatched`` for paths that are no route) and method
  (GET, POST, HEAD, or OTHER for any other name: the label sets stay closed);
* ``feverous_es_stage_seconds{stage}``: the time each pipeline stage took per verified batch
  (embed, pages, candidates, rerank, select, hop, verdict), ``feverous_es_batch_claims``: the
  claims each batch held;
* ``feverous_es_queue_waiting`` / ``feverous_es_queue_capacity``: requests waiting for the
  pipeline, and how many may; ``feverous_es_queue_rejected_total``: requests answered 503
  because the queue was full;
* ``feverous_es_model_runs_total{model}``, ``feverous_es_model_rows_total{model}``,
  ``feverous_es_model_tokens_total{model}``: each model's runs, the inputs they read and their
  non-padding tokens (what :mod:`feverous_es.runtime.costs` counts), over verify, search and
  entail alike; ``feverous_es_store_calls_total{method}`` and
  ``feverous_es_store_hits_total{method}``: the store's calls and what they returned;
* ``feverous_es_store_errors_total{kind}``: failed store calls (``unreachable``,
  ``unauthorized``, ``incompatible``, ``other``);
* ``feverous_es_ready``: 1 while the last readiness check passed (checked at start and every
  few seconds: :mod:`feverous_es.serve.readiness`);
* ``feverous_es_build_info{version}`` and ``feverous_es_model_info{model, file, sha256}``: what
  is running;
* under ``serve`` (:mod:`feverous_es.serve.connections`): ``feverous_es_connections_open`` and
  ``feverous_es_connections_cap``, and ``feverous_es_connections_refused_total{reason}``:
  connections refused at accept (``cap``, ``client_cap``) or cut by a deadline
  (``read_deadline``: the 408s, ``write_deadline``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from feverous_es.errors import (
    IncompatibleIndex,
    IndexChanged,
    StoreError,
    StoreUnauthorized,
    StoreUnreachable,
)
from feverous_es.runtime.costs import MODEL_KINDS, STORE_KINDS, read_count_name
from feverous_es.serve.guard import ConnectionGuard

CONTENT_TYPE = CONTENT_TYPE_LATEST
PREFIX = "feverous_es"
METHODS = frozenset({"GET", "POST", "HEAD"})  # the methods a route answers; the rest: OTHER
OTHER_METHOD = "OTHER"
UNMATCHED = "unmatched"  # the route label of a path no route serves: one series, not one a URL
# Request and stage latencies run from milliseconds (search, health) to tens of seconds (a batch
# of 64 claims): the buckets cover both.
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
_STORE_ERROR_KINDS: tuple[tuple[type[StoreError], str], ...] = (
    (StoreUnreachable, "unreachable"),
    (StoreUnauthorized, "unauthorized"),
    (IncompatibleIndex, "incompatible"),
    (IndexChanged, "changed"),
)


def store_error_kind(error: StoreError) -> str:
    return next((kind for cls, kind in _STORE_ERROR_KINDS if isinstance(error, cls)), "other")


class ServiceMetrics:
    """The metrics of one app. ``queue_waiting`` and ``queue_capacity`` are read at each
    scrape; ``models`` is ``/v1/health``'s model list (name and files' sha256)."""

    def __init__(
        self,
        *,
        version: str,
        models: Iterable[Mapping[str, Any]],
        queue_waiting: Callable[[], float],
        queue_capacity: int,
    ) -> None:
        self.registry = registry = CollectorRegistry()
        self.requests = Counter(
            f"{PREFIX}_requests", "Requests answered, by route, method and status.",
            ["route", "method", "status"], registry=registry,
        )  # fmt: skip
        self.request_seconds = Histogram(
            f"{PREFIX}_request_seconds", "Request latency, by route.", ["route"],
            buckets=SECONDS_BUCKETS, registry=registry,
        )  # fmt: skip
        self.stage_seconds = Histogram(
            f"{PREFIX}_stage_seconds", "Seconds a verified batch spent in each pipeline stage.",
            ["stage"], buckets=SECONDS_BUCKETS, registry=registry,
        )  # fmt: skip
        self.batch_claims = Histogram(
            f"{PREFIX}_batch_claims", "Claims verified together in one pipeline batch.",
            buckets=BATCH_BUCKETS, registry=registry,
        )  # fmt: skip
        Gauge(
            f"{PREFIX}_queue_waiting", "Requests waiting for the pipeline.", registry=registry
        ).set_function(queue_waiting)
        Gauge(
            f"{PREFIX}_queue_capacity", "Requests that may wait before 503.", registry=registry
        ).set(queue_capacity)
        self.rejected = Counter(
            f"{PREFIX}_queue_rejected", "Requests refused with 503 because the queue was full.",
            registry=registry,
        )  # fmt: skip
        self.store_errors = Counter(
            f"{PREFIX}_store_errors", "Store calls that failed, by kind.", ["kind"],
            registry=registry,
        )  # fmt: skip
        self.model_counts = {
            kind: Counter(
                f"{PREFIX}_model_{kind}", f"Model {help}, by model.", ["model"], registry=registry
            )
            for kind, help in zip(MODEL_KINDS, ("runs", "inputs read", "non-padding tokens read"),
                                  strict=True)
        }  # fmt: skip
        self.store_counts = {
            kind: Counter(
                f"{PREFIX}_store_{kind}",
                f"Store {kind}, by method.",
                ["method"],
                registry=registry,
            )
            for kind in STORE_KINDS
        }
        self.ready = Gauge(
            f"{PREFIX}_ready", "1 while the last readiness check passed, else 0.",
            registry=registry,
        )  # fmt: skip
        Info(f"{PREFIX}_build", "The running package.", registry=registry).info(
            {"version": version}
        )
        model_info = Info(
            f"{PREFIX}_model", "Each model file the pipeline runs, with its sha256.",
            ["model", "file"], registry=registry,
        )  # fmt: skip
        for model in models:
            for file, digest in model["files"].items():
                model_info.labels(model=model["name"], file=file).info({"sha256": digest})

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count a request. ``method`` is the client's: a name outside :data:`METHODS` counts
        as ``OTHER`` (a client inventing methods must not add a series for each)."""
        method = method if method in METHODS else OTHER_METHOD
        self.requests.labels(route=route, method=method, status=str(status)).inc()
        self.request_seconds.labels(route=route).observe(seconds)

    def observe_batch(self, claims: int, stage_seconds: Mapping[str, float]) -> None:
        self.batch_claims.observe(claims)
        for stage, seconds in stage_seconds.items():
            self.stage_seconds.labels(stage=stage).observe(seconds)

    def observe_costs(self, counts: Mapping[str, int]) -> None:
        """Count what a request's work cost, by the meter's names
        (:func:`~feverous_es.runtime.costs.read_count_name`)."""
        for name, count in counts.items():
            what, subject, kind = read_count_name(name)
            if what == "store" and kind in self.store_counts:
                self.store_counts[kind].labels(method=subject).inc(count)
            elif what == "model" and kind in self.model_counts:
                self.model_counts[kind].labels(model=subject).inc(count)

    def observe_store_error(self, error: StoreError) -> None:
        self.store_errors.labels(kind=store_error_kind(error)).inc()

    def watch_connections(self, guard: ConnectionGuard) -> None:
        """Report the connections ``guard`` holds and refuses, read at each scrape."""
        self.registry.register(_ConnectionCollector(guard))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _ConnectionCollector(Collector):
    def __init__(self, guard: ConnectionGuard) -> None:
        self.guard = guard

    def collect(self) -> Iterable[Any]:
        yield GaugeMetricFamily(
            f"{PREFIX}_connections_open", "Connections the server holds.", value=self.guard.open
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_connections_cap", "Connections the server may hold at once.",
            value=self.guard.limits.cap,
        )  # fmt: skip
        refused = CounterMetricFamily(
            f"{PREFIX}_connections_refused",
            "Connections refused at accept or cut by a deadline, by reason.", labels=["reason"],
        )  # fmt: skip
        for reason, count in self.guard.refused.items():
            refused.add_metric([reason], count)
        yield refused
