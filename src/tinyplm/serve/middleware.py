"""Plain ASGI middlewares around the app (plain ASGI: they see every request, errors included, and
cost next to nothing per request).

- :class:`Accounting` (outermost) counts each request as accepted when it reaches the app and as
  answered when its response is complete, by status (the Prometheus counters, and the summary the
  server prints when it stops), and stamps its arrival time for the timing breakdown.
- :class:`BodyLimit` refuses a body over ``max_bytes`` with ``413`` before the app parses it: at
  once from ``Content-Length``, or while reading a chunked body, which is buffered up to the limit
  and then handed to the app whole. A body of which no part arrives for ``timeout_s`` (a client
  that sends part of it and stalls) is answered ``408`` and its connection closed: it would
  otherwise hold its connection for as long as the client liked and, at shutdown, hold the server
  up for its whole grace period and then be cancelled mid-read. The deadline is an idle one, reset
  by each part received, so a slow but steady upload is served however long the whole body takes.
- :class:`BearerAuth` (when the server has an API key) answers ``401`` with ``WWW-Authenticate:
  Bearer`` unless the request carries ``Authorization: Bearer KEY``, except on its open paths
  (``/health``, the OpenAPI docs and, unless asked otherwise, ``/metrics``). The token is compared
  in constant time (``hmac.compare_digest`` of SHA-256 digests, so not even the key's length
  shows), and neither the key nor a token sent is written to any answer or log line.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

ARRIVED = "tinyplm_arrived"


@dataclass
class Tally:
    """Requests that reached the app, and those answered, by HTTP status."""

    accepted: int = 0
    answered: int = 0
    status: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict:
        return {"accepted": self.accepted, "answered": self.answered,
                "status": {str(k): v for k, v in sorted(self.status.items())}}


class Accounting:
    """See the module docstring; ``on_answer(path, status)`` observes each answered request."""

    def __init__(self, app, tally: Tally, on_answer) -> None:
        self.app, self.tally, self.on_answer = app, tally, on_answer

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})[ARRIVED] = time.perf_counter()
        self.tally.accepted += 1
        status = 500

        async def counted(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.tally.answered += 1
                self.tally.status[status] += 1
                self.on_answer(scope["path"], status)

        await self.app(scope, receive, counted)


class BodyLimit:
    """See the module docstring."""

    def __init__(self, app, max_bytes: int, on_reject, timeout_s: float = math.inf,
                 on_slow: Callable[[], None] | None = None) -> None:
        self.app, self.max_bytes, self.on_reject = app, max_bytes, on_reject
        self.timeout_s, self.on_slow = timeout_s, on_slow

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._reject(send, int(declared) if declared.isdigit() else None)
            return
        try:
            async with asyncio.timeout(None) as idle:
                chunks = await self._body(receive, send, idle)
        except TimeoutError:
            await self._slow(send)
            return
        if chunks is None:
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _body(self, receive, send, idle: asyncio.Timeout) -> list[bytes] | None:
        """The body's chunks, or None once it is answered (413) or the client went away; ``idle``
        expires ``timeout_s`` after the last chunk (or the start), each chunk putting it off."""
        chunks, size, loop = [], 0, asyncio.get_running_loop()
        while True:
            if not math.isinf(self.timeout_s):
                idle.reschedule(loop.time() + self.timeout_s)
            message = await receive()
            if message["type"] == "http.disconnect":
                return None  # the client went away before its body was complete
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._reject(send, None)
                return None
            if not message.get("more_body", False):
                return chunks

    async def _slow(self, send) -> None:
        if self.on_slow is not None:
            self.on_slow()
        body = orjson.dumps({"error": f"no part of the request body arrived for {self.timeout_s:g} s",
                             "kind": "body_timeout", "problems": [
                                 {"field": "body", "expected": f"each part of the body within {self.timeout_s:g} s "
                                                               "of the one before"}]})
        await send({"type": "http.response.start", "status": 408,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def _reject(self, send, size: int | None) -> None:
        self.on_reject()
        got = f"{size} bytes" if size is not None else "more"
        body = orjson.dumps({"error": "request body too large", "kind": "too_large", "problems": [
            {"field": "body", "expected": f"at most {self.max_bytes} bytes", "got": got}]})
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


#: Paths open without the API key: liveness and the API's documentation.
OPEN_PATHS = frozenset({"/health", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})


class BearerAuth:
    """See the module docstring; ``on_reject()`` observes each 401."""

    def __init__(self, app, key: str, open_paths: frozenset[str], on_reject: Callable[[], None]) -> None:
        self.app, self.open_paths, self.on_reject = app, open_paths, on_reject
        self._digest = hashlib.sha256(key.encode()).digest()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        token = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, rest = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    token = rest.strip()
                break
        if token is not None and hmac.compare_digest(hashlib.sha256(token).digest(), self._digest):
            await self.app(scope, receive, send)
            return
        self.on_reject()
        if token is None:
            message, challenge = "send the API key: Authorization: Bearer <key>", b"Bearer"
        else:
            message, challenge = "the bearer token is not this server's API key", b'Bearer error="invalid_token"'
        body = orjson.dumps({"error": message, "kind": "unauthorized"})
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", challenge)]})
        await send({"type": "http.response.body", "body": body})
