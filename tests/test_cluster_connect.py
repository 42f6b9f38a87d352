"""`tinyplm.cluster.connect`'s refusals, with a stand-in `ray` module: a missing library names the
extra to install, an address where nothing listens is refused in seconds, an unreachable cluster
names its address and Ray's cause first, and a token-authenticated one says how to give the token
(Ray 2.60's `ray start` no longer writes one), only when the token is the cause."""

from __future__ import annotations

import socket
import sys
import time
import types

import pytest

from tinyplm import cluster
from tinyplm.cluster import RAY_EXTRA, ClusterError, connect


def stand_in_ray(monkeypatch: pytest.MonkeyPatch, error: Exception | None, probe: bool = False) -> list[dict]:
    """Install a fake ``ray`` whose ``init`` raises ``error`` (or connects); returns its calls. The
    TCP probe of a ``host:port`` address is passed over unless ``probe``."""
    if not probe:
        monkeypatch.setattr(cluster, "probe", lambda address: None)
    calls: list[dict] = []
    ray = types.ModuleType("ray")
    ray.is_initialized = lambda: False

    def init(**kwargs):
        calls.append(kwargs)
        if error is not None:
            raise error

    ray.init = init
    monkeypatch.setitem(sys.modules, "ray", ray)
    return calls


def test_a_missing_library_names_the_command_and_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in_ray(monkeypatch, None)
    with pytest.raises(ClusterError) as caught:
        connect(None, "ray.no_such_library", "tinyplm sweep")
    assert "tinyplm sweep" in str(caught.value) and RAY_EXTRA in str(caught.value)


def test_an_unreachable_cluster_is_named_with_how_to_give_its_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    calls = stand_in_ray(monkeypatch, ConnectionError("Token authentication is enabled\n but no token"))
    with pytest.raises(ClusterError) as caught:
        connect("10.1.2.3:6379", "ray", "tinyplm predict --ray")
    message = str(caught.value)
    assert calls and calls[0]["address"] == "10.1.2.3:6379"
    assert "the Ray cluster at 10.1.2.3:6379" in message
    assert "RAY_AUTH_MODE=token" in message and "ray get-auth-token" in message
    assert "Token authentication is enabled but no token" in message  # Ray's reason, on one line


def test_with_token_mode_set_the_hint_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    stand_in_ray(monkeypatch, ConnectionError("connection refused"))
    with pytest.raises(ClusterError) as caught:
        connect("10.1.2.3:6379", "ray", "tinyplm sweep")
    assert "RAY_AUTH_MODE" not in str(caught.value) and "connection refused" in str(caught.value)


def test_a_local_ray_that_will_not_start_is_named_as_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    stand_in_ray(monkeypatch, RuntimeError("no room"))
    with pytest.raises(ClusterError, match="a local Ray: no room"):
        connect(None, "ray", "tinyplm sweep")


def test_a_reached_cluster_is_returned_as_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = stand_in_ray(monkeypatch, None)
    ray, ours = connect(None, "ray", "tinyplm sweep")
    assert ours is True and ray is sys.modules["ray"] and calls[0]["address"] is None


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: nothing listens there


def test_an_address_where_nothing_listens_is_refused_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = stand_in_ray(monkeypatch, None, probe=True)
    port = _closed_port()
    started = time.monotonic()
    with pytest.raises(ClusterError, match=rf"--address 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port} "
                                           r"\(connection refused\); is `ray start --head` running there\?"):
        connect(f"127.0.0.1:{port}", "ray", "tinyplm sweep")
    assert time.monotonic() - started < cluster.PROBE_SECONDS + 1 and not calls  # Ray was never asked
    with pytest.raises(ClusterError, match="--address nonsense: expected host:port"):
        connect("nonsense", "ray", "tinyplm sweep")
    for address in ("auto", "ray://127.0.0.1:1"):  # left to Ray as they are
        connect(address, "ray", "tinyplm sweep")
    assert [c["address"] for c in calls] == ["auto", "ray://127.0.0.1:1"]


@pytest.mark.parametrize("said", ["Could not find any running Ray instance. Please specify the one to connect to",
                                  "Ray Client requires pip package `ray[client]`."])
def test_a_failure_not_about_the_token_says_its_cause_without_the_token_hint(
        monkeypatch: pytest.MonkeyPatch, said: str) -> None:
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    stand_in_ray(monkeypatch, ConnectionError(said))
    with pytest.raises(ClusterError) as caught:
        connect("auto", "ray", "tinyplm sweep")
    assert str(caught.value) == f"cannot start or reach the Ray cluster at auto: {said}"
