"""The HTTP service: one model behind ``POST /predict``, with dynamic batching and back-pressure.

Endpoints: ``POST /predict`` (one example or ``{"inputs": [...]}``, see :mod:`tinyplm.serve.api`;
served by :class:`~tinyplm.serve.endpoint.PredictEndpoint`, plain ASGI, for speed), for an embedding
model ``POST /embed`` (TEI's shape) and ``POST /v1/embeddings`` (OpenAI's)
(:mod:`tinyplm.serve.embeddings`), ``GET /health`` (the process answers), ``GET /ready`` (200 once
the model is loaded and warmed up, with what it serves; 503 before), ``GET /metrics`` (Prometheus,
:mod:`tinyplm.serve.metrics`) and the OpenAPI docs at ``/docs`` (the document,
:mod:`tinyplm.serve.openapi`, states exactly what each endpoint accepts and answers). No endpoint
writes a file or opens a path a request names.

Every client mistake is a 4xx with a JSON body naming the field and what was expected: malformed
JSON 400, a body over the byte limit 413, a body not sent as JSON 415, a missing or mistyped field,
an empty list, too many texts, an over-long text 422; a body of which no part arrives within the
timeout 408 (a slow but steady upload is served). A full queue is a 503 with ``Retry-After`` at
once; a request not answered within the timeout is a 504. A 500 means the server is at fault,
never the client. With an API key (``ServeSettings.api_key``), every endpoint but ``/health``, the
docs and (unless ``protect_metrics``) ``/metrics`` answers 401 without ``Authorization: Bearer KEY``
(:class:`~tinyplm.serve.middleware.BearerAuth`).

Each ``/predict`` answer carries ``Server-Timing`` (``queue``, ``infer`` and ``app`` durations in
ms: waiting for a batch, the batch's inference, and all of the request's time in the app) and
``X-Batch-Size`` (the examples in its forward batch), which the load benchmark reads.

The warm-up runs a few typical inputs and, for a runtime that builds kernels per input shape
(OpenVINO), every shape a batch can take; length groups weigh a forward pass as the runtime's
(:mod:`tinyplm.serve.warmup`). Once warmed up, every
object alive (the model, the tokenizer, the app) is moved out of the garbage collector's sight
(``gc.freeze``): a full collection walking them stalled the event loop and the batch every few
seconds, which showed in the tail latency (what it cost: docs/results/code-choices.md).

FastAPI on uvicorn (uvloop and httptools where installed, see :mod:`tinyplm.serve.server`): both
maintained and widely deployed; pydantic gives the request schema and its validation from one type,
FastAPI the docs pages and the small endpoints, and uvicorn shuts down gracefully on SIGTERM (stop
accepting, finish open requests, then the app's shutdown). A heavier stack (Ray Serve, Triton) would
be out of proportion for one CPU model.
"""

import asyncio
import gc
import logging
import math
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.responses import Response

from tinyplm.errors import TinyplmError
from tinyplm.inference.predictor import Predictor
from tinyplm.serve.api import Limits
from tinyplm.serve.auth import check_api_key
from tinyplm.serve.batcher import MicroBatcher
from tinyplm.serve.embeddings import vector_paths, vector_routes
from tinyplm.serve.endpoint import JSON, Dispatch, PredictEndpoint, error_body
from tinyplm.serve.metrics import ServeMetrics
from tinyplm.serve.middleware import OPEN_PATHS, Accounting, BearerAuth, BodyLimit, Tally
from tinyplm.serve.openapi import openapi_document
from tinyplm.serve.warmup import needs_shape_warm_up, pass_overhead_tokens, warm_shapes

log = logging.getLogger("tinyplm.serve")


@dataclass(frozen=True)
class ServeSettings:
    """Batching (``max_batch`` examples, ``max_wait_ms``), back-pressure (``max_queue`` examples,
    ``timeout_s`` per request), request limits, whether to warm the model up before ready, and the
    API key (``None``: no key; never shown in a repr) and whether ``/metrics`` needs it too;
    ``streams``: batches an OpenVINO model runs at once (:class:`~tinyplm.serve.batcher.MicroBatcher`)."""

    max_batch: int = 32
    max_wait_ms: float = 5.0
    max_queue: int = 256
    timeout_s: float = 10.0
    limits: Limits = field(default_factory=Limits)
    warm_up: bool = True
    api_key: str | None = field(default=None, repr=False)
    protect_metrics: bool = False
    streams: int = 1

    def check(self) -> None:
        """Raise ``TinyplmError`` naming the option that cannot work."""
        if self.max_batch < 1:
            raise TinyplmError(f"--max-batch: expected at least 1, got {self.max_batch}")
        # not ``< 0``: NaN compares false with everything, and an endless wait (inf, NaN) would hold a
        # lone request after a batch of several until its timeout
        if not 0 <= self.max_wait_ms < math.inf:
            raise TinyplmError(f"--max-wait-ms: expected a finite number, 0 or more, got {self.max_wait_ms}")
        if not 0 < self.timeout_s < math.inf:
            raise TinyplmError(f"--timeout: expected a finite, positive number of seconds, got {self.timeout_s}")
        if min(self.limits.max_texts, self.limits.max_chars, self.limits.max_body_bytes) < 1:
            raise TinyplmError("--max-texts, --max-chars and --max-body-bytes must be at least 1")
        if self.max_queue < self.limits.max_texts:
            raise TinyplmError(f"--max-queue {self.max_queue} is smaller than --max-texts {self.limits.max_texts}: "
                               "a full request could never be queued")
        if self.streams < 1:
            raise TinyplmError(f"--streams: expected at least 1, got {self.streams}")
        if self.api_key is not None:
            check_api_key(self.api_key, "the API key")
        if self.protect_metrics and self.api_key is None:
            raise TinyplmError("--protect-metrics needs an API key (--api-key, --api-key-file or TINYPLM_API_KEY)")


@dataclass
class ServeState:
    """What the endpoints share: the predictor, settings, batcher, metrics, readiness and tally."""

    predictor: Predictor
    settings: ServeSettings
    batcher: MicroBatcher
    metrics: ServeMetrics
    tally: Tally = field(default_factory=Tally)
    ready: bool = False


def create_app(predictor: Predictor, settings: ServeSettings | None = None):
    """The ASGI app serving ``predictor`` (see the module docstring) -> (app, state). The app is
    the FastAPI app behind ``POST /predict``'s dispatch and the body-limit, auth (with a key) and
    accounting middlewares; run it with uvicorn, or test it with ``fastapi.testclient.TestClient``
    (which runs its start-up: batcher, warm-up)."""
    settings = settings or ServeSettings()
    settings.check()
    predictor.pass_overhead_tokens = pass_overhead_tokens(predictor.model)  # its runtime's, for length groups
    streams = predictor.use_streams(settings.streams)
    batcher = MicroBatcher(predictor.predict, settings.max_batch, settings.max_wait_ms / 1000, settings.max_queue,
                           workers=streams)
    metrics = ServeMetrics(lambda: batcher.depth)
    batcher.on_batch = metrics.observe_batch
    state = ServeState(predictor, settings, batcher, metrics)
    api = FastAPI(title="tinyplm serve", version="1", lifespan=_lifespan(state), default_response_class=JSON,
                  description=f"Predictions of {predictor.info.path} ({predictor.info.head} head).")
    _errors(api, state)
    _routes(api, state)
    predict = PredictEndpoint(state)
    vectors = vector_routes(state)
    info = predictor.info
    document = openapi_document(
        title=api.title, description=api.description, head=info.head, regression=info.is_regression,
        body_type=predict.body_type, limits=settings.limits, timeout_s=settings.timeout_s,
        auth=settings.api_key is not None, metrics_protected=settings.protect_metrics,
        extra_paths=partial(vector_paths, vectors, limit=info.max_length))
    api.openapi = lambda: document  # FastAPI's documented way to serve a document of one's own
    app = Dispatch(api, {"/predict": ("POST", predict), **vectors}, metrics.error)
    app = BodyLimit(app, settings.limits.max_body_bytes, lambda: metrics.error("too_large"), settings.timeout_s,
                    lambda: metrics.error("body_timeout"))
    if settings.api_key is not None:
        open_paths = OPEN_PATHS if settings.protect_metrics else OPEN_PATHS | {"/metrics"}
        app = BearerAuth(app, settings.api_key, open_paths, lambda: metrics.error("unauthorized"))
    return Accounting(app, state.tally, metrics.answered), state


def _lifespan(state: ServeState):
    @asynccontextmanager
    async def lifespan(_app):
        state.batcher.start()
        warm = asyncio.get_running_loop().create_task(_warm_up(state))
        try:
            yield
        finally:
            await state.batcher.stop()  # every accepted request is answered first
            warm.cancel()

    return lifespan


async def _warm_up(state: ServeState) -> None:
    if state.settings.warm_up:
        predictor = state.predictor
        await state.batcher.call_each(predictor.warm_up)  # on every inference thread: each has its stream
        batch, length = state.settings.max_batch, predictor.info.max_length
        if needs_shape_warm_up(predictor.model):  # see tinyplm.serve.warmup
            ran = await state.batcher.call_each(partial(warm_shapes, predictor.model, batch, length))
            log.info("warmed up on %d input shapes", min(ran))
    gc.collect()
    gc.freeze()  # see the module docstring
    state.ready = True
    state.metrics.ready.set(1)


def error(status: int, kind: str, message: str, state: ServeState, headers: dict | None = None,
          details: list[dict] | None = None) -> Response:
    """A JSON error answer ``{"error", "kind"[, "problems"]}``, counted by kind."""
    state.metrics.error(kind)
    return Response(error_body(kind, message, details), status_code=status, headers=headers,
                    media_type="application/json")


def _errors(api: FastAPI, state: ServeState) -> None:
    @api.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> Response:
        return error(exc.status_code, "http", str(exc.detail), state, headers=getattr(exc, "headers", None))

    @api.exception_handler(Exception)
    async def internal(_request: Request, exc: Exception) -> Response:
        return error(500, "internal", f"internal error ({exc.__class__.__name__}); see the server's log", state)


def _routes(api: FastAPI, state: ServeState) -> None:
    """The small endpoints (their OpenAPI entries: :mod:`tinyplm.serve.openapi`)."""
    info, limits = state.predictor.info, state.settings.limits

    @api.get("/health")
    async def health() -> JSON:
        return JSON({"status": "ok"})

    @api.get("/ready")
    async def ready() -> JSON:
        if not state.ready:
            return JSON({"ready": False}, status_code=503, headers={"Retry-After": "1"})
        s = state.settings
        return JSON({"ready": True, **info.describe(), "max_batch": s.max_batch, "max_wait_ms": s.max_wait_ms,
                     "max_queue": s.max_queue, "streams": state.batcher.workers, "timeout_s": s.timeout_s,
                     "max_texts": limits.max_texts, "max_chars": limits.max_chars,
                     "max_body_bytes": limits.max_body_bytes})

    @api.get("/metrics")
    async def metrics() -> Response:
        return Response(state.metrics.text(), media_type=state.metrics.content_type)
