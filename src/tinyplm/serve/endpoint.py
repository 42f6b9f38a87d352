"""``POST /predict`` as a plain ASGI app, and the JSON answers every part of the server sends.

Why not a FastAPI route: FastAPI's request path (its exception middlewares, the router, dependency
solving, reading the body into a ``Request``, validating a ``dict`` and encoding the answer) cost a
large share of what one request may cost in all when a small int8 student is served (measured with
an empty handler: docs/results/serve-load.md, "Figures measured earlier"). Here one request is: the
body bytes (already buffered by :class:`~tinyplm.serve.middleware.BodyLimit`) parsed and validated
in one pass by pydantic-core (:func:`~tinyplm.serve.api.parse_body`, the same type the OpenAPI
document shows), the examples queued on the :class:`~tinyplm.serve.batcher.MicroBatcher`, and the
answer encoded by orjson and sent in two ASGI messages with its ``Server-Timing`` and
``X-Batch-Size`` headers.

:class:`Dispatch` sends ``POST /predict`` here and everything else to the FastAPI app (``/health``,
``/ready``, ``/metrics``, the docs); another method on ``/predict`` is a 405 naming ``Allow: POST``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from pydantic import TypeAdapter
from starlette.responses import Response

from tinyplm.inference.pairs import pair_mismatch
from tinyplm.inference.records import TextInput
from tinyplm.models.finite import NanOutputs
from tinyplm.serve.api import BodyError, parse_body, request_type, to_inputs
from tinyplm.serve.batcher import ClientGone, QueueFull, Stopped
from tinyplm.serve.middleware import ARRIVED

log = logging.getLogger("tinyplm.serve")

JSON_TYPE = (b"content-type", b"application/json")


def error_body(kind: str, message: str, details: list[dict] | None = None) -> bytes:
    """The JSON error body ``{"error", "kind"[, "problems"]}``."""
    body: dict[str, Any] = {"error": message, "kind": kind}
    if details:
        body["problems"] = details
    return orjson.dumps(body)


async def send_json(send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Send a complete JSON answer (start and body) on an ASGI ``send``."""
    head = [JSON_TYPE, (b"content-length", str(len(body)).encode()), *(headers or ())]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


class JSON(Response):
    """A JSON response encoded by orjson (the FastAPI app's default response class)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


async def read_body(receive) -> bytes | None:
    """The whole request body, or ``None`` when the client went away first."""
    message = await receive()
    if message["type"] == "http.disconnect":
        return None
    body = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while message.get("more_body", False):
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
    return b"".join(chunks)


RETRY = [(b"retry-after", b"1")]


class JsonEndpoint:
    """A plain-ASGI JSON endpoint on the shared ``state`` (:class:`~tinyplm.serve.app.ServeState`):
    its body validated by ``adapter`` (pydantic), its inputs run on the micro-batcher; the steps
    (:meth:`parsed`, :meth:`submitted`, :meth:`answer`) answer every failure themselves, as
    ``/predict`` does, so each route built on it has the same errors, back-pressure and headers."""

    def __init__(self, state, body_type) -> None:
        self.state = state
        self.body_type = body_type
        self.adapter = TypeAdapter(body_type)
        self.timeout_s = state.settings.timeout_s

    async def fail(self, send, status: int, kind: str, message: str, details: list[dict] | None = None,
                   headers: list[tuple[bytes, bytes]] | None = None) -> None:
        """An error answer, counted by kind."""
        self.state.metrics.error(kind)
        await send_json(send, status, error_body(kind, message, details), headers)

    async def parsed(self, scope, receive, send):
        """The validated body, or None once an error has been answered (not ready, not JSON, not
        fitting the schema) or the client went away."""
        if not self.state.ready:
            await self.fail(send, 503, "not_ready", "the model is still warming up", headers=RETRY)
            return None
        raw = await read_body(receive)
        if raw is None:
            return None  # the client went away: nobody to answer
        try:
            return parse_body(self.adapter, raw, _header(scope, b"content-type"))
        except BodyError as exc:
            kind = "unsupported_media_type" if exc.status == 415 else "validation"
            await self.fail(send, exc.status, kind, exc.message, exc.details)
            return None

    async def submitted(self, receive, send, items: list) -> tuple[list, object] | None:
        """(predictions, timing) of ``items`` from the batcher, or None once a failure is answered:
        503 with ``Retry-After`` for a full queue or a server shutting down, 504 past the timeout,
        500 when the model failed (naming the inputs whose outputs are NaN, :mod:`tinyplm.models.finite`),
        or the client went away while it waited (its work is given up, :class:`~tinyplm.serve.batcher.ClientGone`)."""
        gone = asyncio.ensure_future(receive())  # after the whole body, ASGI's next message is the disconnect
        try:
            return await self.state.batcher.submit(items, self.timeout_s, gone)
        except ClientGone:  # its work given up: nobody to answer
            return None
        except QueueFull as exc:
            await self.fail(send, 503, "queue_full", f"server busy: {exc}; retry later", headers=RETRY)
        except Stopped:
            await self.fail(send, 503, "shutting_down", "the server is shutting down", headers=RETRY)
        except TimeoutError:
            await self.fail(send, 504, "timeout", f"no answer within {self.timeout_s:g} s")
        except NanOutputs as exc:  # the model failed on these inputs: still the server's fault, said plainly
            log.warning("%s", exc)
            await self.fail(send, 500, "nan_outputs", str(exc))
        except Exception as exc:  # the model failed: the server's fault, never the client's
            log.exception("prediction failed")
            await self.fail(send, 500, "internal", f"internal error ({exc.__class__.__name__}); see the server's log")
        finally:
            gone.cancel()
        return None

    async def answer(self, scope, send, payload: bytes, timing) -> None:
        """A 200 with ``payload`` and the ``Server-Timing`` and ``X-Batch-Size`` headers, observed."""
        total = time.perf_counter() - scope["state"][ARRIVED] if ARRIVED in scope.get("state", ()) else 0.0
        self.state.metrics.observe_request(total, timing)
        await send_json(send, 200, payload, [
            (b"server-timing", f"queue;dur={timing.queue_s * 1000:.3f}, infer;dur={timing.infer_s * 1000:.3f}, "
                               f"app;dur={total * 1000:.3f}".encode()),
            (b"x-batch-size", str(timing.batch).encode())])


class PredictEndpoint(JsonEndpoint):
    """``POST /predict`` (see the module docstring) for the shared ``state``
    (:class:`~tinyplm.serve.app.ServeState`)."""

    def __init__(self, state) -> None:
        self.head = state.predictor.info.head
        super().__init__(state, request_type(self.head, state.settings.limits))

    async def __call__(self, scope, receive, send) -> None:
        body = await self.parsed(scope, receive, send)
        if body is None:
            return
        items, many = to_inputs(self.head, body)
        refused = self._pair_refusal(items)
        if refused is not None:  # the client's request, not the server's failure
            at, message, expected = refused
            await self.fail(send, 422, "validation", message,
                            [{"field": f"inputs[{at}].text_pair" if many else "text_pair", "expected": expected}])
            return
        done = await self.submitted(receive, send, items)
        if done is None:
            return
        preds, timing = done
        payload = orjson.dumps({"predictions": [p.as_dict() for p in preds]} if many else
                               {"prediction": preds[0].as_dict()})
        await self.answer(scope, send, payload, timing)


    def _pair_refusal(self, items: list) -> tuple[int, str, str] | None:
        """(the example's index, the message, what its ``text_pair`` should be) for the first example
        whose second text the model cannot read (its tokenizer gives a segment id its config has no
        row for), or whose having one or not does not fit the task it was trained on
        (:mod:`tinyplm.inference.pairs`); None when every example fits."""
        predictor = self.state.predictor
        info, segments = predictor.info, predictor.pair_problem
        for at, x in enumerate(items):
            paired = getattr(x, "text_pair", None) is not None
            if segments and paired:
                return at, "this model cannot read pairs of texts", f"no text_pair: {segments}"
            why = pair_mismatch(info.task, info.pairs, paired) if isinstance(x, TextInput) else None
            if why is not None:
                expected = f"a second text: {why}" if info.pairs else f"no text_pair: {why}"
                return at, f"this model reads {'pairs of texts' if info.pairs else 'one text per example'}", expected
        return None


def _header(scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


class Dispatch:
    """Plain ASGI routing in front of ``app``: ``routes`` maps a path to ``(method, handler)``; that
    method goes to the handler, another one is a 405, any other path goes to ``app``."""

    def __init__(self, app, routes: dict[str, tuple[str, Callable]], on_error: Callable[[str], None]) -> None:
        self.app, self.routes, self.on_error = app, routes, on_error

    async def __call__(self, scope, receive, send) -> None:
        route = self.routes.get(scope["path"]) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
        elif scope["method"] == route[0]:
            await route[1](scope, receive, send)
        else:
            self.on_error("http")
            await send_json(send, 405, error_body("http", "Method Not Allowed"),
                            [(b"allow", route[0].encode())])
