"""The server's Prometheus metrics (``GET /metrics``, text format, via ``prometheus_client``).

Each app has its own registry (so several apps in one process, as in the tests, do not collide):

- ``tinyplm_requests_total{path,status}``: every HTTP request answered;
- ``tinyplm_request_errors_total{kind}``: ``validation``, ``too_large``, ``unsupported_media_type``,
  ``queue_full``, ``timeout``, ``not_ready``, ``shutting_down``, ``internal``, ``nan_outputs`` (the model's
  outputs for some of the request's inputs are NaN), ``http`` (404, 405),
  ``unauthorized``, ``body_timeout``;
- ``tinyplm_examples_total``: examples predicted; ``tinyplm_batches_total``: forward batches;
- ``tinyplm_batch_size``: examples per batch (histogram); ``tinyplm_queue_depth``: examples waiting;
- per ``/predict`` request, where the time went (histograms, seconds): ``tinyplm_request_seconds``
  (in the app, from the request's arrival to its response), ``tinyplm_queue_seconds`` (waiting for
  a batch), ``tinyplm_inference_seconds`` (the batch it was in: tokenising, forward, reading back)
  and ``tinyplm_http_seconds`` (the rest: parsing, validation, serialising);
- ``tinyplm_ready``: 1 once the model is loaded and warmed up.

Labelled children are looked up once per label set and kept (``labels()`` takes a lock and builds
a key each call: a few microseconds per request).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from tinyplm.serve.batcher import Timing

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: Paths counted under their own name; anything else is ``other`` (bounded label values).
PATHS = ("/predict", "/health", "/ready", "/metrics", "/docs", "/openapi.json")


class ServeMetrics:
    """The metrics of one app (see the module docstring)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, queue_depth: Callable[[], float]) -> None:
        disable_created_metrics()  # no *_created series: start times are noise here (process-wide setting)
        r = self.registry = CollectorRegistry()
        self.requests = Counter("tinyplm_requests", "HTTP requests answered", ["path", "status"], registry=r)
        self.errors = Counter("tinyplm_request_errors", "requests answered with an error, by kind", ["kind"],
                              registry=r)
        self.examples = Counter("tinyplm_examples", "examples predicted", registry=r)
        self.batches = Counter("tinyplm_batches", "forward batches run", registry=r)
        self.batch_size = Histogram("tinyplm_batch_size", "examples per forward batch", buckets=BATCH_BUCKETS,
                                    registry=r)
        self.queue_depth = Gauge("tinyplm_queue_depth", "examples waiting for a batch", registry=r)
        self.queue_depth.set_function(queue_depth)
        self.ready = Gauge("tinyplm_ready", "1 when the model is loaded and warmed up", registry=r)
        self.request_s = self._seconds("tinyplm_request_seconds", "time in the app per /predict request")
        self.queue_s = self._seconds("tinyplm_queue_seconds", "time a /predict request waited for a batch")
        self.inference_s = self._seconds("tinyplm_inference_seconds", "inference time of the batch a request was in")
        self.http_s = self._seconds("tinyplm_http_seconds", "time outside queue and inference: parsing, "
                                    "validation, serialising")
        self._children: dict[tuple, object] = {}

    def _seconds(self, name: str, doc: str) -> Histogram:
        return Histogram(name, doc, buckets=LATENCY_BUCKETS, registry=self.registry)

    def observe_batch(self, examples: int, seconds: float) -> None:
        """One forward batch of ``examples`` ran for ``seconds``."""
        self.batches.inc()
        self.examples.inc(examples)
        self.batch_size.observe(examples)

    def observe_request(self, total_s: float, timing: Timing) -> None:
        """One answered /predict request: its time in the app and where it went."""
        self.request_s.observe(total_s)
        self.queue_s.observe(timing.queue_s)
        self.inference_s.observe(timing.infer_s)
        self.http_s.observe(max(0.0, total_s - timing.queue_s - timing.infer_s))

    def answered(self, path: str, status: int) -> None:
        """One HTTP request answered with ``status``."""
        key = (path if path in PATHS else "other", status)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.requests.labels(key[0], str(status))
        child.inc()

    def error(self, kind: str) -> None:
        """One request answered with an error of ``kind``."""
        child = self._children.get(kind)
        if child is None:
            child = self._children[kind] = self.errors.labels(kind)
        child.inc()

    def text(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
