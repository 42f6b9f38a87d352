"""The OpenAPI document of ``tinyplm serve``: exactly what each endpoint accepts and answers.

It is built here from the types the handlers use, not inferred from route signatures: the
``/predict`` body is the very pydantic type :class:`~tinyplm.serve.endpoint.PredictEndpoint`
validates with (so its limits are the server's settings), every answer a handler can give is listed
with its status, media type, headers and body schema, and, when the server has an API key, a bearer
security scheme covers every operation the key protects (each also lists its 401). The fuzz test
(``tests/serve/test_schema_fuzz.py``) runs schemathesis with all its checks against a live server,
so a rule the service enforces but the document does not state (or the reverse) fails it.

Response schemas list the fields a client can rely on and leave others allowed, so a new field in
an answer is not a breaking change of the document.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from tinyplm.serve.api import Limits
from tinyplm.tasks.heads import Head, PerHead

#: Where component schemas live in the document.
REF = "#/components/schemas/{model}"
#: The security scheme's name in the document.
BEARER = "bearerAuth"
#: Error kinds of the ``{"error", "kind"}`` body (``kind`` is also the metrics label).
ERROR_KINDS = ("validation", "too_large", "unsupported_media_type", "queue_full", "timeout", "not_ready",
               "shutting_down", "internal", "nan_outputs", "http", "unauthorized")


def _no_default(*names: str):
    """A ``json_schema_extra`` leaving out the ``None`` default of optional fields that are never null."""

    def edit(schema: dict[str, Any]) -> None:
        for name in names:
            schema["properties"][name].pop("default", None)

    return edit


class Problem(BaseModel):
    """One thing wrong with a request: where (``inputs[2].text``), what was expected and what came."""

    model_config = ConfigDict(json_schema_extra=_no_default("got"))

    field: str
    expected: str
    got: str = None


class ErrorBody(BaseModel):
    """Every error answer: a message, its kind and, for a request the client can fix, what to fix."""

    model_config = ConfigDict(json_schema_extra=_no_default("problems"))

    error: str
    kind: Literal[ERROR_KINDS]
    problems: list[Problem] = None


class Health(BaseModel):
    """The process answers."""

    status: Literal["ok"]


class Ready(BaseModel):
    """The model is loaded and warmed up: what it serves (model, head, task, labels, max length) and
    the server's settings."""

    ready: Literal[True]
    head: str
    max_batch: int
    max_wait_ms: float
    max_queue: int
    streams: int
    timeout_s: float
    max_texts: int
    max_chars: int
    max_body_bytes: int


class NotReady(BaseModel):
    """Still loading or warming up."""

    ready: Literal[False]


class ClassPrediction(BaseModel):
    """A classifier's answer: the arg-max label and the probability of every label."""

    label: str
    scores: dict[str, float]


class ValuePrediction(BaseModel):
    """A regression model's output."""

    value: float


class SpanPrediction(BaseModel):
    """The best answer span of the context (empty, offsets -1, when none qualified); ``id`` echoes the
    question's; a score is null when no span qualified."""

    model_config = ConfigDict(json_schema_extra=_no_default("id"))

    id: str = None
    answer: str
    start: int = Field(ge=-1)
    end: int = Field(ge=-1)
    score: float | None
    null_score: float | None


class TagPrediction(BaseModel):
    """One tag per word."""

    tokens: list[str]
    tags: list[str]


class VectorPrediction(BaseModel):
    """A text's vector."""

    vector: list[float]


#: The prediction schema of each head: regression -> its pydantic model.
PREDICTION_TYPES: PerHead = PerHead("prediction schema", {
    Head.SEQUENCE: lambda regression: ValuePrediction if regression else ClassPrediction,
    Head.SPAN: lambda regression: SpanPrediction,
    Head.TOKEN: lambda regression: TagPrediction,
    Head.EMBEDDING: lambda regression: VectorPrediction,
})


def prediction_type(head: Head, regression: bool) -> type[BaseModel]:
    """The schema of one prediction of a model with ``head``."""
    return PREDICTION_TYPES[head](regression)


def _answers(prediction: type[BaseModel]) -> Any:
    one = create_model("OnePrediction", __doc__="The prediction of a one-example body.", prediction=prediction)
    many = create_model("Predictions", __doc__="The predictions of an 'inputs' body, in its order.",
                        predictions=list[prediction])
    return one | many


def _json(schema: dict, description: str, headers: dict | None = None) -> dict:
    out = {"description": description, "content": {"application/json": {"schema": schema}}}
    return {**out, "headers": headers} if headers else out


def _header(description: str) -> dict:
    return {"description": description, "required": True, "schema": {"type": "string"}}


RETRY = {"Retry-After": _header("seconds to wait before retrying")}
WWW_AUTH = {"WWW-Authenticate": _header("the scheme to authenticate with: Bearer")}


def _predict_errors(fails: Callable[..., dict], limits: Limits, timeout_s: float) -> dict[str, dict]:
    """``/predict``'s error answers by status code; ``fails(description, headers)`` makes one."""
    return {
        "400": fails("the body is not valid JSON"),
        "408": fails(f"no part of the body arrived for {timeout_s:g} s (the connection is closed)"),
        "413": fails(f"the body is over {limits.max_body_bytes} bytes"),
        "415": fails("the body is not sent as JSON"),
        "422": fails("the JSON does not fit the schema: a field missing, unknown, mistyped, empty or too long, "
                     f"or more than {limits.max_texts} examples"),
        "500": fails("the server failed (its log says why); never the client's fault"),
        "503": fails("warming up, queue full or shutting down; retry after Retry-After seconds", RETRY),
        "504": fails(f"no answer within {timeout_s:g} s"),
    }


def openapi_document(*, title: str, description: str, head: Head, regression: bool, body_type: Any,
                     limits: Limits, timeout_s: float, auth: bool, metrics_protected: bool,
                     extra_paths: Callable[[Callable, dict, dict], dict] | None = None) -> dict:
    """The OpenAPI 3.1 document of one server (see the module docstring); ``extra_paths(ref, errors,
    auth)`` adds the paths of more routes (the vector endpoints, :func:`tinyplm.serve.embeddings.vector_paths`)
    given the schema maker, ``/predict``'s error answers and the auth keys of a protected operation."""
    schemas: dict[str, dict] = {}

    def ref(tp: Any) -> dict:
        schema = TypeAdapter(tp).json_schema(ref_template=REF)
        schemas.update(schema.pop("$defs", {}))
        return schema

    error = ref(ErrorBody)
    fails = partial(_json, error)  # (description, headers): an error answer with the JSON error body
    unauthorized = {"401": fails("no bearer token, or not the server's API key", WWW_AUTH)} if auth else {}
    predict_errors = _predict_errors(fails, limits, timeout_s)
    timing = {"Server-Timing": _header("queue, infer and app durations (ms)"),
              "X-Batch-Size": _header("examples in the forward batch of this request")}
    paths = {
        "/predict": {"post": {
            "summary": "Predict one example, or a list under 'inputs'",
            "description": f"At most {limits.max_texts} examples, {limits.max_chars} characters per text, "
                           f"{limits.max_body_bytes} bytes per body.",
            "operationId": "predict",
            "requestBody": {"required": True, "content": {"application/json": {"schema": ref(body_type)}}},
            "responses": {"200": _json(ref(_answers(prediction_type(head, regression))), "the predictions",
                                       timing), **predict_errors, **unauthorized},
            **({"security": [{BEARER: []}]} if auth else {}),
        }},
        "/health": {"get": {"summary": "Liveness: the process answers", "operationId": "health", "security": [],
                            "responses": {"200": _json(ref(Health), "the process answers")}}},
        "/ready": {"get": {
            "summary": "Readiness: the model is loaded and warmed up", "operationId": "ready",
            "responses": {"200": _json(ref(Ready), "ready: what is served, and the settings"),
                          "503": _json(ref(NotReady), "not ready yet", RETRY), **unauthorized},
            **({"security": [{BEARER: []}]} if auth else {}),
        }},
        "/metrics": {"get": {
            "summary": "Prometheus metrics (text exposition format)", "operationId": "metrics",
            "responses": {"200": {"description": "every metric",
                                  "content": {"text/plain": {"schema": {"type": "string"}}}},
                          **(unauthorized if metrics_protected else {})},
            **({"security": [{BEARER: []}] if metrics_protected else []} if auth else {}),
        }},
    }
    if extra_paths is not None:
        protected = {"responses": unauthorized, "security": [{BEARER: []}]} if auth else {}
        paths.update(extra_paths(ref, predict_errors, protected))
    doc = {"openapi": "3.1.0", "info": {"title": title, "version": "1", "description": description},
           "paths": paths, "components": {"schemas": schemas}}
    if auth:
        doc["components"]["securitySchemes"] = {BEARER: {
            "type": "http", "scheme": "bearer",
            "description": "the server's API key: Authorization: Bearer KEY"}}
    return doc
