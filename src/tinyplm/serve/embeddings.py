"""An embedding model's two vector endpoints, in the shapes of the two services clients already speak.

- ``POST /embed``, text-embeddings-inference's (TEI): ``{"inputs": str | [str], "normalize": true,
  "truncate": false}`` -> ``[[float, ...], ...]``, one vector per text, in order. ``normalize``
  L2-normalises each vector (false: the model's own output, already of unit length when its layout
  ends in ``Normalize``).
- ``POST /v1/embeddings``, OpenAI's: ``{"input": str | [str], "model": str, "encoding_format":
  "float" | "base64", "dimensions"?: int, "user"?: str}`` -> ``{"object": "list", "data":
  [{"object": "embedding", "index": i, "embedding": [...]}], "model", "usage": {"prompt_tokens",
  "total_tokens"}}``. Vectors are of unit length, as OpenAI's are; ``dimensions`` (1 to the
  model's width) keeps the first ``dimensions`` components and normalises them again, as OpenAI does
  for its v3 models; ``base64`` is the little-endian float32 bytes of the vector (what the ``openai``
  package asks for by default, and decodes); ``model`` is echoed (the server serves one model,
  whatever the name); ``user`` is accepted and ignored. Token-id arrays in ``input`` are refused
  (422 naming ``input``): the server reads texts.

A text longer than the model's token limit is refused with a 413 naming it and its token count, as
TEI does for ``truncate: false`` (its default); ``truncate: true`` cuts it to the limit instead. The
OpenAI route has no such switch and refuses it the same way (OpenAI refuses over-long input too).
A static sentence encoder has no limit. ``usage`` counts the tokens the model read (after any cut).

Both run their texts through the same micro-batcher as ``/predict`` (back-pressure: a 503 with
``Retry-After`` when the queue is full), behind the same API key and body limits, with the same
error bodies and headers (:class:`~tinyplm.serve.endpoint.JsonEndpoint`), and are in the OpenAPI
document (:func:`vector_paths`). On a model that is not an embedding model both answer a 404 saying
so, and the document leaves them out.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from tinyplm.inference.records import TextInput
from tinyplm.serve.api import BATCH, ONE, TEXT_PATTERN, Limits
from tinyplm.serve.endpoint import JsonEndpoint, error_body, send_json
from tinyplm.serve.openapi import _json
from tinyplm.tasks.heads import Head, PerHead

EMBED, OPENAI = "/embed", "/v1/embeddings"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _texts_type(limits: Limits) -> Any:
    """A text, or a list of 1 to ``max_texts`` texts (each as ``/predict``'s); told apart by type, so
    a problem names ``input[2]``, not a member of the union."""
    text = Annotated[str, Field(min_length=1, max_length=limits.max_chars, pattern=TEXT_PATTERN)]
    many = Annotated[list[text], Field(min_length=1, max_length=limits.max_texts)]
    return Annotated[Annotated[text, Tag(ONE)] | Annotated[many, Tag(BATCH)],
                     Discriminator(lambda value: ONE if isinstance(value, str) else BATCH)]


def tei_request(limits: Limits) -> type[BaseModel]:
    """TEI's ``/embed`` body (see the module docstring)."""
    texts = _texts_type(limits)

    class EmbedRequest(_Strict):
        """Texts to embed (TEI's request): ``normalize`` to unit length, ``truncate`` over-long texts."""

        inputs: texts
        normalize: bool = True
        truncate: bool = False

    return EmbedRequest


def openai_request(limits: Limits, dim: int) -> type[BaseModel]:
    """OpenAI's ``/v1/embeddings`` body for a model of width ``dim`` (see the module docstring)."""
    texts = _texts_type(limits)

    def no_defaults(schema: dict[str, Any]) -> None:  # optional fields that are never null
        for name in ("dimensions", "user"):
            schema["properties"][name].pop("default", None)

    class EmbeddingsRequest(_Strict):
        """Texts to embed (OpenAI's request)."""

        model_config = ConfigDict(json_schema_extra=no_defaults)

        input: texts
        model: Annotated[str, Field(max_length=200)]
        encoding_format: Literal["float", "base64"] = "float"
        # a whole number, 15.0 included as JSON Schema's "integer" says ("number" + multipleOf 1 here,
        # since pydantic's strict int refuses 15.0)
        dimensions: Annotated[float, Field(ge=1, le=dim, multiple_of=1)] = None
        user: Annotated[str, Field(max_length=200)] = None

    return EmbeddingsRequest


class OpenAIEmbedding(BaseModel):
    """One vector of an OpenAI answer: a list of floats, or base64 of its float32 bytes."""

    object: Literal["embedding"]
    index: int
    embedding: list[float] | str


class OpenAIUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class OpenAIEmbeddings(BaseModel):
    """OpenAI's answer: one vector per input text, in order."""

    object: Literal["list"]
    data: list[OpenAIEmbedding]
    model: str
    usage: OpenAIUsage


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows of ``vectors`` ``(n, dim)`` scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


class VectorEndpoint(JsonEndpoint):
    """The steps both vector routes share: the texts run on the batcher, over-long ones refused
    unless cut (see the module docstring) -> ``(vectors (n, dim) float32, tokens read, timing)``."""

    async def vectors(self, receive, send, texts: list[str], truncate: bool, many: bool):
        done = await self.submitted(receive, send, [TextInput(t) for t in texts])
        if done is None:
            return None
        preds, timing = done
        limit = self.state.predictor.info.max_length
        long = [(i, p.tokens) for i, p in enumerate(preds) if limit is not None and p.tokens > limit]
        if long and not truncate:
            field = self.texts_field
            await self.fail(send, 413, "validation", f"{len(long)} text(s) over the model's limit of {limit} tokens", [
                {"field": f"{field}[{i}]" if many else field, "expected": self.too_long.format(limit=limit),
                 "got": f"{n} tokens"} for i, n in long[:10]])
            return None
        tokens = sum(min(p.tokens, limit) if limit is not None else p.tokens for p in preds)
        return np.asarray([p.vector for p in preds], dtype=np.float32), tokens, timing

    texts_field = "inputs"
    too_long = "at most {limit} tokens (or truncate: true)"


class TeiEndpoint(VectorEndpoint):
    """``POST /embed`` (TEI's shape, see the module docstring)."""

    def __init__(self, state) -> None:
        super().__init__(state, tei_request(state.settings.limits))

    async def __call__(self, scope, receive, send) -> None:
        body = await self.parsed(scope, receive, send)
        if body is None:
            return
        texts = [body.inputs] if isinstance(body.inputs, str) else list(body.inputs)
        done = await self.vectors(receive, send, texts, body.truncate, not isinstance(body.inputs, str))
        if done is None:
            return
        vectors, _, timing = done
        out = unit(vectors) if body.normalize else vectors
        await self.answer(scope, send, orjson.dumps(out.tolist()), timing)


class OpenAIEndpoint(VectorEndpoint):
    """``POST /v1/embeddings`` (OpenAI's shape, see the module docstring)."""

    texts_field = "input"
    too_long = "at most {limit} tokens"

    def __init__(self, state) -> None:
        super().__init__(state, openai_request(state.settings.limits, state.predictor.model.dim))

    async def __call__(self, scope, receive, send) -> None:
        body = await self.parsed(scope, receive, send)
        if body is None:
            return
        texts = [body.input] if isinstance(body.input, str) else list(body.input)
        done = await self.vectors(receive, send, texts, False, not isinstance(body.input, str))
        if done is None:
            return
        vectors, tokens, timing = done
        out = unit(vectors[:, : int(body.dimensions)] if body.dimensions else vectors)
        data = [{"object": "embedding", "index": i, "embedding": _encoded(row, body.encoding_format)}
                for i, row in enumerate(out)]
        payload = {"object": "list", "data": data, "model": body.model,
                   "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        await self.answer(scope, send, orjson.dumps(payload), timing)


def _encoded(row: np.ndarray, encoding: str) -> list[float] | str:
    """A vector ``(dim,)`` as floats, or base64 of its little-endian float32 bytes."""
    if encoding == "base64":
        return base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
    return row.tolist()


class NotEmbedding:
    """Both vector routes on a model that is not an embedding model: a 404 saying so."""

    def __init__(self, state) -> None:
        self.state = state

    async def __call__(self, scope, receive, send) -> None:
        head = self.state.predictor.info.head
        self.state.metrics.error("http")
        await send_json(send, 404, error_body("http", f"{scope['path']} serves embedding models; this server's model "
                                                      f"has the {head} head: use POST /predict"))


def _endpoints(state) -> dict[str, tuple[str, Any]]:
    return {EMBED: ("POST", TeiEndpoint(state)), OPENAI: ("POST", OpenAIEndpoint(state))}


#: The vector routes of each head that has them (others answer :class:`NotEmbedding`).
VECTOR_ROUTES: PerHead = PerHead("vector endpoints", {Head.EMBEDDING: _endpoints})


def vector_routes(state) -> dict[str, tuple[str, Any]]:
    """The ``Dispatch`` routes ``{path: ("POST", handler)}`` of ``/embed`` and ``/v1/embeddings``."""
    head = state.predictor.info.head
    if head in VECTOR_ROUTES:
        return VECTOR_ROUTES[head](state)
    missing = NotEmbedding(state)
    return {EMBED: ("POST", missing), OPENAI: ("POST", missing)}


def vector_paths(routes: dict[str, tuple[str, Any]], ref, errors: dict, extra: dict, limit: int | None) -> dict:
    """The OpenAPI paths of the vector ``routes`` (none for :class:`NotEmbedding`): ``ref`` turns a
    type into a schema, ``errors`` are ``/predict``'s error answers, ``extra`` the operation's auth
    keys (a 401 answer and ``security``), ``limit`` the model's token limit."""
    paths = {}
    timing = {"Server-Timing": {"description": "queue, infer and app durations (ms)", "required": True,
                                "schema": {"type": "string"}},
              "X-Batch-Size": {"description": "examples in the forward batch of this request", "required": True,
                               "schema": {"type": "string"}}}
    too_long = {"413": {**errors["413"], "description": errors["413"]["description"]
                        + (f", or a text over the model's {limit} tokens" if limit is not None else "")}}
    answers = {EMBED: (list[list[float]], "TEI's /embed: one vector per text", "embed"),
               OPENAI: (OpenAIEmbeddings, "OpenAI's /v1/embeddings: one vector per text", "openai_embeddings")}
    for path, (_method, handler) in routes.items():
        if not isinstance(handler, VectorEndpoint):
            continue
        answer, summary, op = answers[path]
        responses = {**errors, **too_long, **extra.get("responses", {})}
        paths[path] = {"post": {
            "summary": summary, "operationId": op,
            "requestBody": {"required": True, "content": {"application/json": {"schema": ref(handler.body_type)}}},
            "responses": {"200": _json(ref(answer), "the vectors, in input order", timing), **responses},
            **{k: v for k, v in extra.items() if k != "responses"},
        }}
    return paths
