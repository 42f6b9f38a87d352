"""Ray for the commands that scale out (``tinyplm sweep``, ``tinyplm predict --ray``): imported only
here and only when one of them runs, connected to a cluster or started on this machine, with one
error that says what to install or set."""

from __future__ import annotations

import os
import socket
from importlib import import_module

from tinyplm.errors import TinyplmError

RAY_EXTRA = "pip install 'tinyplm[cluster]' (ray[tune,data], optuna)"

#: Seconds a plain ``host:port`` address is given to accept a TCP connection before Ray is asked
#: (Ray itself retries an address where nothing listens for minutes).
PROBE_SECONDS = 5.0

#: Words of Ray's refusals that are about its token (``ray start`` clusters of Ray 2.59+).
AUTH_WORDS = ("token", "auth", "unauthenticated", "permission denied")

TOKEN_HINT = ("a cluster started by `ray start` on Ray 2.59+ asks for its token: set RAY_AUTH_MODE=token here, with "
              "its token in ~/.ray/auth_token or RAY_AUTH_TOKEN; `ray get-auth-token` on the head prints it")


class ClusterError(TinyplmError):
    """Ray is missing or cannot be reached (exit 2, with what to install or check)."""


def connect(address: str | None, library: str, command: str):
    """``(ray, ours)``: the ``ray`` module with ``library`` (``ray.tune``, ``ray.data``) importable,
    connected to the cluster at ``address`` or to a Ray started on this machine, and whether this
    call connected it (then the caller shuts it down when done). A ``host:port`` address is probed
    first (``PROBE_SECONDS``); ``auto`` and ``ray://`` addresses go to Ray as they are. Raises
    ``ClusterError`` naming ``command`` when Ray is not installed, or naming the address and the
    cause when it cannot be reached (how to give a token only when Ray refused one)."""
    try:
        import ray

        import_module(library)
    except ImportError as exc:
        raise ClusterError(f"{command} needs {library}, which cannot be imported ({exc}); install it with: "
                           f"{RAY_EXTRA}") from None
    if ray.is_initialized():
        return ray, False
    probe(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        cause = " ".join(str(exc).split())[:300]
        hint = ""
        if address and not os.environ.get("RAY_AUTH_MODE") and any(w in cause.lower() for w in AUTH_WORDS):
            hint = f" ({TOKEN_HINT})"
        raise ClusterError(f"cannot start or reach {where}: {cause}{hint}") from None
    return ray, True


def probe(address: str | None, timeout: float = PROBE_SECONDS) -> None:
    """For a ``host:port`` address, a TCP connection within ``timeout`` seconds; raises
    ``ClusterError`` when nothing answers there. Other addresses (none, ``auto``, ``local``,
    ``ray://...``) are left to Ray."""
    if not address or "://" in address or address in ("auto", "local"):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ClusterError(f"--address {address}: expected host:port (the address `ray start --head` prints, "
                           "e.g. 10.0.0.5:6379), auto, or ray://host:10001")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        why = f"no answer in {timeout:g} s" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise ClusterError(f"--address {address}: nothing answers at {address} ({why.lower()}); is "
                           "`ray start --head` running there?") from None


def cluster_cpus(ray) -> float:
    """The CPUs the connected Ray cluster has (as Ray counts them: a container's limit, not the
    host's cores), or this machine's count when Ray reports none."""
    return float(ray.cluster_resources().get("CPU", os.cpu_count() or 1))


def node_cpus(ray) -> float:
    """The CPUs of the connected cluster's largest live node (one Ray task runs on one node), or
    :func:`cluster_cpus` when Ray lists no nodes."""
    counts = [float(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive", True)]
    return max(counts) if counts and max(counts) > 0 else cluster_cpus(ray)
