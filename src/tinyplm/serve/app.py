"""The HTTP service: one model behind ``POST /predict``, with dynamic batching and back-pressure.

Endpoints: ``POST /predict`` (one example or ``{"inputs": [...]}``, see :mod:`tinyplm.serve.api`),
``GET /health`` (the process answers), ``GET /ready`` (200 once the model is loaded and warmed up,
with what it serves; 503 before), ``GET /metrics`` (Prometheus, :mod:`tinyplm.serve.metrics`) and
the OpenAPI docs at ``/docs``. No endpoint writes a file or opens a path a request names.

Every client mistake is a 4xx with a JSON body naming the field and what was expected: malformed
JSON 400, a body over the byte limit 413, a missing or mistyped field, an empty list, too many
texts, an over-long text 422. A full queue is a 503 with ``Retry-After`` at once; a request not
answered within the timeout is a 504. A 500 means the server is at fault, never the client.

Each ``/predict`` answer carries ``Server-Timing`` (``queue``, ``infer`` and ``app`` durations in
ms: waiting for a batch, the batch's inference, and all of the request's time in the app) and
``X-Batch-Size`` (the examples in its forward batch), which the load benchmark reads.

Once warmed up, every object alive (the model, the tokenizer, the app) is moved out of the
garbage collector's sight (``gc.freeze``): a full collection walking them stalled the event loop
and the batch for ~200 ms every few seconds, which was 1-2% of requests at twice the median
latency (p99 400 -> 215 ms for MiniLM-L6 at 32 clients).

FastAPI on uvicorn: both maintained and widely deployed; FastAPI gives the request schema, its
validation and the OpenAPI docs from one pydantic type, and uvicorn shuts down gracefully on
SIGTERM (stop accepting, finish open requests, then the app's shutdown). Starlette alone would mean
writing the validation and docs by hand; a heavier stack (Ray Serve, Triton) would be out of
proportion for one CPU model.
"""

import asyncio
import gc
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from tinyplm.errors import TinyplmError
from tinyplm.serve.api import Limits, problems, request_type, to_inputs
from tinyplm.serve.batcher import MicroBatcher, QueueFull, Stopped
from tinyplm.serve.metrics import ServeMetrics
from tinyplm.serve.middleware import ARRIVED, Accounting, BodyLimit, Tally
from tinyplm.serve.predictor import Predictor

#: The error answers of /predict, for the OpenAPI docs.
RESPONSES = {400: {"description": "malformed JSON"}, 413: {"description": "body too large"},
             422: {"description": "a field is missing, mistyped or too long"},
             503: {"description": "queue full, warming up or shutting down (Retry-After)"},
             504: {"description": "no answer within the timeout"}}


@dataclass(frozen=True)
class ServeSettings:
    """Batching (``max_batch`` examples, ``max_wait_ms``), back-pressure (``max_queue`` examples,
    ``timeout_s`` per request), request limits and whether to warm the model up before ready."""

    max_batch: int = 32
    max_wait_ms: float = 5.0
    max_queue: int = 256
    timeout_s: float = 10.0
    limits: Limits = field(default_factory=Limits)
    warm_up: bool = True

    def check(self) -> None:
        """Raise ``TinyplmError`` naming the option that cannot work."""
        if self.max_batch < 1:
            raise TinyplmError(f"--max-batch: expected at least 1, got {self.max_batch}")
        if self.max_wait_ms < 0:
            raise TinyplmError(f"--max-wait-ms: expected 0 or more, got {self.max_wait_ms}")
        if self.timeout_s <= 0:
            raise TinyplmError(f"--timeout: expected a positive number of seconds, got {self.timeout_s}")
        if min(self.limits.max_texts, self.limits.max_chars, self.limits.max_body_bytes) < 1:
            raise TinyplmError("--max-texts, --max-chars and --max-body-bytes must be at least 1")
        if self.max_queue < self.limits.max_texts:
            raise TinyplmError(f"--max-queue {self.max_queue} is smaller than --max-texts {self.limits.max_texts}: "
                               "a full request could never be queued")


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
    the FastAPI app inside the accounting and body-limit middlewares; run it with uvicorn, or
    test it with ``fastapi.testclient.TestClient`` (which runs its start-up: batcher, warm-up)."""
    settings = settings or ServeSettings()
    settings.check()
    batcher = MicroBatcher(predictor.predict, settings.max_batch, settings.max_wait_ms / 1000, settings.max_queue)
    metrics = ServeMetrics(lambda: batcher.depth)
    batcher.on_batch = metrics.observe_batch
    state = ServeState(predictor, settings, batcher, metrics)
    api = FastAPI(title="tinyplm serve", version="1", lifespan=_lifespan(state),
                  description=f"Predictions of {predictor.info.path} ({predictor.info.head} head).")
    _errors(api, state)
    _routes(api, state)
    limited = BodyLimit(api, settings.limits.max_body_bytes, lambda: metrics.errors.labels("too_large").inc())
    return Accounting(limited, state.tally, metrics.answered), state


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
        await state.batcher.call(state.predictor.warm_up)
    gc.collect()
    gc.freeze()  # see the module docstring
    state.ready = True
    state.metrics.ready.set(1)


def error(status: int, kind: str, message: str, state: ServeState, headers: dict | None = None,
          details: list[dict] | None = None) -> JSONResponse:
    """A JSON error answer ``{"error", "kind"[, "problems"]}``, counted by kind."""
    state.metrics.errors.labels(kind).inc()
    body = {"error": message, "kind": kind, **({"problems": details} if details else {})}
    return JSONResponse(body, status_code=status, headers=headers)


def _errors(api: FastAPI, state: ServeState) -> None:
    @api.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        if any(e.get("type") == "json_invalid" for e in errors):
            return error(400, "validation", "the request body is not valid JSON", state, details=problems(errors))
        return error(422, "validation", "the request body does not fit the schema (see /docs)", state,
                     details=problems(errors))

    @api.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        return error(exc.status_code, "http", str(exc.detail), state, headers=getattr(exc, "headers", None))

    @api.exception_handler(Exception)
    async def internal(_request: Request, exc: Exception) -> JSONResponse:
        return error(500, "internal", f"internal error ({exc.__class__.__name__}); see the server's log", state)


def _routes(api: FastAPI, state: ServeState) -> None:
    info, limits = state.predictor.info, state.settings.limits
    body_type = request_type(info.head, limits)

    @api.get("/health", summary="Liveness: the process answers")
    async def health() -> dict:
        return {"status": "ok"}

    @api.get("/ready", summary="Readiness: the model is loaded and warmed up")
    async def ready() -> JSONResponse:
        if not state.ready:
            return JSONResponse({"ready": False}, status_code=503, headers={"Retry-After": "1"})
        s = state.settings
        return JSONResponse({"ready": True, **info.describe(), "max_batch": s.max_batch,
                             "max_wait_ms": s.max_wait_ms, "max_queue": s.max_queue, "timeout_s": s.timeout_s,
                             "max_texts": limits.max_texts, "max_chars": limits.max_chars,
                             "max_body_bytes": limits.max_body_bytes})

    @api.get("/metrics", summary="Prometheus metrics (text format)")
    async def metrics() -> Response:
        return Response(state.metrics.text(), media_type=state.metrics.content_type)

    @api.post("/predict", summary="Predict one example, or a list under 'inputs'", responses=RESPONSES)
    async def predict(request: Request, body: Annotated[body_type, Body()]) -> JSONResponse:
        return await _predict(state, request, body)


async def _predict(state: ServeState, request: Request, body) -> JSONResponse:
    """Queue the body's examples, wait for their batch, answer with their predictions."""
    if not state.ready:
        return error(503, "not_ready", "the model is still warming up", state, headers={"Retry-After": "1"})
    items, many = to_inputs(state.predictor.info.head, body)
    try:
        preds, timing = await state.batcher.submit(items, state.settings.timeout_s)
    except QueueFull as exc:
        return error(503, "queue_full", f"server busy: {exc}; retry later", state, headers={"Retry-After": "1"})
    except Stopped:
        return error(503, "shutting_down", "the server is shutting down", state, headers={"Retry-After": "1"})
    except TimeoutError:
        return error(504, "timeout", f"no answer within {state.settings.timeout_s:g} s", state)
    total = time.perf_counter() - request.scope.get("state", {}).get(ARRIVED, time.perf_counter())
    state.metrics.observe_request(total, timing)
    payload = {"predictions": [p.as_dict() for p in preds]} if many else {"prediction": preds[0].as_dict()}
    headers = {"Server-Timing": f"queue;dur={timing.queue_s * 1000:.3f}, infer;dur={timing.infer_s * 1000:.3f}, "
                                f"app;dur={total * 1000:.3f}", "X-Batch-Size": str(timing.batch)}
    return JSONResponse(payload, headers=headers)
