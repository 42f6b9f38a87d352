"""The server's API key: where it comes from, what it may hold, and when its absence is a risk.

``tinyplm serve`` takes the key from ``--api-key-file PATH`` (the file's one line; the safest: a key
on the command line shows in ``ps``), ``--api-key KEY`` or the environment variable
``TINYPLM_API_KEY``. Clients send it as ``Authorization: Bearer KEY``; the check itself is
:class:`tinyplm.serve.middleware.BearerAuth`. No message here or anywhere in the server names the
key: errors name its source.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from tinyplm.errors import TinyplmError

ENV_VAR = "TINYPLM_API_KEY"


def check_api_key(key: str, source: str) -> None:
    """Raise ``TinyplmError`` naming ``source`` (never the key) unless ``key`` can be sent in a header:
    one or more printable ASCII characters without spaces."""
    if not key or not key.isascii() or not key.isprintable() or " " in key:
        raise TinyplmError(f"{source}: an API key must be one or more printable ASCII characters without spaces")


def resolve_api_key(key: str | None, key_file: Path | None) -> str | None:
    """The API key from ``key`` (``--api-key`` or ``TINYPLM_API_KEY``) or ``key_file``, or ``None``
    for none. Raises ``TinyplmError`` for both given, an unreadable file, or an empty (or
    whitespace-only) key, naming the file or option."""
    if key is not None and key_file is not None:
        raise TinyplmError(f"give the API key once: --api-key-file, or --api-key / {ENV_VAR}, not both")
    if key_file is not None:
        try:
            text = Path(key_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
            raise TinyplmError(f"--api-key-file {key_file}: cannot read it ({why})") from None
        if not text.strip():
            raise TinyplmError(f"--api-key-file {key_file}: the file is empty (or only whitespace); "
                               "write the key into it")
        key = text.strip()
        check_api_key(key, f"--api-key-file {key_file}")
        return key
    if key is None:
        return None
    if not key.strip():
        raise TinyplmError(f"--api-key / {ENV_VAR}: the key is empty")
    check_api_key(key, f"--api-key / {ENV_VAR}")
    return key


def is_loopback(host: str) -> bool:
    """Whether ``host`` is only reachable from this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False
