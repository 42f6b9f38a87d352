"""The server's socket (tinyplm.serve.server): a port is refused up front, in one line naming it."""

from __future__ import annotations

import errno
import socket

import pytest

from tinyplm.errors import TinyplmError
from tinyplm.serve.server import Stack, bind, run


def test_a_second_server_on_a_port_is_refused_when_it_binds() -> None:
    """Two servers started together on one port both bound it (SO_REUSEADDR, neither listening yet),
    both loaded the model, and the later died with an OSError traceback when uvicorn came to listen:
    the first bind listens at once, so the second is refused before any work, in one line."""
    first = bind("127.0.0.1", 0)
    try:
        port = first.getsockname()[1]
        with pytest.raises(TinyplmError) as refused:
            bind("127.0.0.1", port)
    finally:
        first.close()
    said = str(refused.value)
    assert "\n" not in said and f"cannot listen on 127.0.0.1:{port}" in said and "--host/--port" in said


class _CannotListen(socket.socket):
    """A socket whose listen fails, as a port taken between bind and serving would."""

    def listen(self, *args) -> None:
        raise OSError(errno.EADDRINUSE, "Address already in use")


def test_a_socket_that_fails_when_serving_starts_is_one_line_and_the_app_is_stopped() -> None:
    """An OSError while uvicorn sets up the socket ended the process with a traceback after the
    model loaded: it is a one-line error naming the address and options, and the app, started by
    then, is shut down."""
    events: list[str] = []

    async def app(scope, receive, send) -> None:
        assert scope["type"] == "lifespan"
        while True:
            message = await receive()
            events.append(message["type"])
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return

    sock = _CannotListen(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    with pytest.raises(TinyplmError) as refused:
        run(app, sock, grace_s=1, chosen=Stack("asyncio", "h11"))
    said = str(refused.value)
    assert said == f"cannot listen on 127.0.0.1:{port} (Address already in use); choose another --host/--port"
    assert events == ["lifespan.startup", "lifespan.shutdown"]
