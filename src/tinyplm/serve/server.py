"""Run the app with uvicorn on a socket bound here, and stop gracefully.

The socket is bound and listening (:func:`bind`) before the model loads, so a port out of range or
in use and a host that cannot be listened on are one-line ``TinyplmError`` before any work, and
``--port 0`` gets a free port whose number is known (and printed) before the first request. It
listens at once, not only when uvicorn starts: on Linux two sockets with ``SO_REUSEADDR`` may both
bind one port while neither listens, so two servers started together on one port would both load
the model and the later one die when it came to listen; a listening socket makes the second bind
fail up front. A client that connects while the model loads waits in the backlog and is answered
once the server runs. Should setting the socket up still fail when uvicorn starts serving on it,
that too is a one-line ``TinyplmError`` naming the address (:func:`run`).

SIGTERM or SIGINT: uvicorn stops accepting connections, lets open requests finish (at most
``grace_s``), then runs the app's shutdown, which answers every request still queued. uvicorn then
re-raises the signal it caught, to end the process the way the signal would have; we install
handlers that ignore it, so a requested stop ends with exit code 0 and the summary printed.

The event loop and HTTP parser are chosen explicitly (:func:`stack`): uvloop and httptools (C,
from ``uvicorn[standard]``) when installed, else asyncio and h11 (pure Python); the startup line
says which run. uvloop, httptools and ``/predict`` on plain ASGI (:mod:`tinyplm.serve.endpoint`)
each took CPU off a request through the app (what each saved: docs/results/serve-load.md,
"Figures measured earlier"). Proxy
headers are not read (``X-Forwarded-For`` from a client is not trusted, and the app never uses
the client's address).

Two threads share the GIL: the event loop's and the inference thread's, which holds it between
forward passes (grouping, padding, reading logits back). Python hands the GIL over only every
``sys.getswitchinterval()`` (5 ms by default), so each hand-over could leave both cores idle for
milliseconds; the server sets :data:`SWITCH_INTERVAL_S` (0.5 ms) while it runs, which served
more than the default or a shorter or longer interval (docs/results/serve-load.md).

The tokenizer's own thread pool is off while serving (``TOKENIZERS_PARALLELISM=false`` unless the
environment says otherwise): a batch took less CPU on one thread than on two, whose idle threads
then spin beside the model's, and the server served more (docs/results/serve-load.md).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from tinyplm.errors import TinyplmError

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: How often the GIL may change hands while serving (see the module docstring).
SWITCH_INTERVAL_S = 0.0005
#: Connections the kernel holds for the server to accept.
BACKLOG = 2048
#: The tokenizers library's switch for its thread pool (see the module docstring).
TOKENIZER_THREADS_VAR = "TOKENIZERS_PARALLELISM"


#: The TCP ports a socket can be bound to (0: any free one).
PORTS = range(0, 65536)


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (see the module docstring); raises
    ``TinyplmError`` naming the options when it cannot be bound or listen."""
    if port not in PORTS:
        raise TinyplmError(f"--port: expected a TCP port from {PORTS.start} to {PORTS.stop - 1} "
                           f"(0: any free port), got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted sockets inherit it: without it a response's headers and body, written apart, wait
    # for the client's delayed ACK (40 ms per keep-alive request); asyncio sets it only on sockets
    # it creates itself
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise _refusal(host, port, exc) from None
    sock.set_inheritable(True)
    return sock


def _refusal(host: str, port: int, exc: OSError) -> TinyplmError:
    """The one-line error for a socket that cannot be set up on ``host:port``."""
    return TinyplmError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --host/--port")


@dataclass(frozen=True)
class Stack:
    """The event loop and HTTP/1.1 parser uvicorn runs (uvicorn's ``loop`` and ``http`` names)."""

    loop: str
    http: str

    def __str__(self) -> str:
        return f"{self.loop} loop, {self.http} parser"


def stack() -> Stack:
    """uvloop and httptools where installed, else asyncio and h11 (see the module docstring)."""
    def have(name: str) -> bool:
        return importlib.util.find_spec(name) is not None

    return Stack("uvloop" if have("uvloop") else "asyncio", "httptools" if have("httptools") else "h11")


def run(app, sock: socket.socket, grace_s: float, on_started: Callable[[], None] | None = None,
        chosen: Stack | None = None) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT (see the module docstring); returns after the
    graceful shutdown. ``on_started`` is called once the server accepts connections; ``chosen``
    is the loop and parser (default: :func:`stack`)."""
    chosen = chosen or stack()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", loop=chosen.loop,
                            http=chosen.http, proxy_headers=False, timeout_graceful_shutdown=grace_s,
                            timeout_keep_alive=5)
    server = _Server(config, on_started)
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in STOP_SIGNALS}
    interval, tokenizer_threads = sys.getswitchinterval(), os.environ.get(TOKENIZER_THREADS_VAR)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    os.environ.setdefault(TOKENIZER_THREADS_VAR, "false")
    host, port = sock.getsockname()[:2]
    try:
        server.run(sockets=[sock])
    finally:
        sys.setswitchinterval(interval)
        if tokenizer_threads is None:
            os.environ.pop(TOKENIZER_THREADS_VAR, None)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    if server.failed is not None:
        raise _refusal(host, port, server.failed)
    if not server.started:
        raise TinyplmError("the server did not start (see the messages above)")


class _Server(uvicorn.Server):
    """uvicorn's server, telling us when it accepts connections, and keeping (in ``failed``) an
    ``OSError`` from setting up its socket rather than letting it end the process with a traceback."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._on_started = on_started
        self.failed: OSError | None = None

    async def startup(self, sockets=None) -> None:
        try:
            await super().startup(sockets=sockets)
        except OSError as exc:  # the app has started by then (lifespan): stop it, answering what it queued
            self.failed, self.should_exit = exc, True
            await self.lifespan.shutdown()
            return
        if self.started and self._on_started is not None:
            self._on_started()
