"""Ray for the commands that scale out (``tinyplm sweep``, ``tinyplm predict --ray``): imported only
here and only when one of them runs, connected to a cluster or started on this machine, with one
error that says what to install or set."""

from __future__ import annotations

import os
from importlib import import_module

from tinyplm.errors import TinyplmError

RAY_EXTRA = "pip install 'tinyplm[cluster]' (ray[tune,data], optuna)"


class ClusterError(TinyplmError):
    """Ray is missing or cannot be reached (exit 2, with what to install or check)."""


def connect(address: str | None, library: str, command: str):
    """``(ray, ours)``: the ``ray`` module with ``library`` (``ray.tune``, ``ray.data``) importable,
    connected to the cluster at ``address`` or to a Ray started on this machine, and whether this
    call connected it (then the caller shuts it down when done). Raises ``ClusterError`` naming
    ``command`` when Ray is not installed, or naming the address when it cannot be reached."""
    try:
        import ray

        import_module(library)
    except ImportError as exc:
        raise ClusterError(f"{command} needs {library}, which cannot be imported ({exc}); install it with: "
                           f"{RAY_EXTRA}") from None
    if ray.is_initialized():
        return ray, False
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        if address and not os.environ.get("RAY_AUTH_MODE"):  # Ray 2.59+: `ray start` clusters ask for a token
            where += (" (a cluster started by `ray start` on Ray 2.59+ asks for its token: set RAY_AUTH_MODE=token "
                      "here, with its token in ~/.ray/auth_token or RAY_AUTH_TOKEN; `ray get-auth-token` on the "
                      "head prints it)")
        raise ClusterError(f"cannot start or reach {where}: {' '.join(str(exc).split())[:300]}") from None
    return ray, True


def cluster_cpus(ray) -> float:
    """The CPUs the connected Ray cluster has (as Ray counts them: a container's limit, not the
    host's cores), or this machine's count when Ray reports none."""
    return float(ray.cluster_resources().get("CPU", os.cpu_count() or 1))
