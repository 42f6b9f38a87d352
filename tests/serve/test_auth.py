"""The API key of ``tinyplm serve``: 401 without it on every protected endpoint, 200 with it; the
open ones stay open; the key comes from a flag, a file or the environment, a bad one is named by
its source; and the key never shows in the server's output."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from conftest import make_tiny_model_dir
from helpers_cli import assert_bad_input, cli
from helpers_live import LiveServer
from tinyplm.errors import TinyplmError
from tinyplm.inference.predictor import Predictor
from tinyplm.serve.app import ServeSettings, create_app
from tinyplm.serve.auth import is_loopback, resolve_api_key

KEY = "s3cret-KEY_0123456789"
RIGHT = {"Authorization": f"Bearer {KEY}"}
WRONG = {"Authorization": "Bearer not-the-key"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model_dir(tmp_path_factory.mktemp("auth") / "m")


def _client(model_dir: Path, **settings) -> TestClient:
    app, state = create_app(Predictor.load(model_dir), ServeSettings(api_key=KEY, **settings))
    client = TestClient(app)
    client.state = state
    return client


def _ready(client: TestClient) -> None:
    for _ in range(200):
        if client.get("/ready", headers=RIGHT).status_code == 200:
            return
        time.sleep(0.02)
    raise AssertionError("never ready")


def _unauthorized(resp: httpx.Response, challenge: str) -> None:
    assert resp.status_code == 401, resp.text
    assert resp.json() == {"error": resp.json()["error"], "kind": "unauthorized"}
    assert resp.headers["www-authenticate"] == challenge
    assert KEY not in resp.text


@pytest.mark.parametrize("protect_metrics", [False, True])
def test_every_protected_endpoint_needs_the_key(model_dir: Path, protect_metrics: bool) -> None:
    with _client(model_dir, protect_metrics=protect_metrics) as c:
        _ready(c)
        calls = [("GET", "/ready", None), ("POST", "/predict", {"text": "a good film"}), ("GET", "/nowhere", None)]
        if protect_metrics:
            calls.append(("GET", "/metrics", None))
        for method, path, body in calls:
            _unauthorized(c.request(method, path, json=body), "Bearer")
            _unauthorized(c.request(method, path, json=body, headers=WRONG), 'Bearer error="invalid_token"')
            _unauthorized(c.request(method, path, json=body, headers={"Authorization": KEY}), "Bearer")
            expected = 404 if path == "/nowhere" else 200
            assert c.request(method, path, json=body, headers=RIGHT).status_code == expected, path
        assert c.post("/predict", json={"text": "a"}, headers={"Authorization": f"bearer {KEY}"}).status_code == 200
        for path in ("/health", "/docs", "/openapi.json") + (() if protect_metrics else ("/metrics",)):
            assert c.get(path).status_code == 200, path
        text = c.state.metrics.text().decode()
        count = 9 + 3 * protect_metrics
        assert f'tinyplm_request_errors_total{{kind="unauthorized"}} {count}.0' in text


def test_the_schema_names_the_security_scheme(model_dir: Path) -> None:
    with _client(model_dir) as c:
        doc = c.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": doc["components"]["securitySchemes"]["bearerAuth"][
            "description"]}
    assert doc["paths"]["/predict"]["post"]["security"] == [{"bearerAuth": []}]
    assert "401" in doc["paths"]["/predict"]["post"]["responses"]
    assert doc["paths"]["/health"]["get"]["security"] == [] and doc["paths"]["/metrics"]["get"]["security"] == []
    assert KEY not in str(doc)


def test_the_key_comes_from_a_flag_a_file_or_the_environment(tmp_path: Path) -> None:
    assert resolve_api_key(None, None) is None
    assert resolve_api_key(KEY, None) == KEY
    (tmp_path / "key").write_text(f"{KEY}\n")
    assert resolve_api_key(None, tmp_path / "key") == KEY
    cases = [
        (" ", None, "the key is empty"),
        ("two words", None, "printable ASCII characters without spaces"),
        (KEY, tmp_path / "key", "not both"),
        (None, tmp_path / "missing", f"--api-key-file {tmp_path / 'missing'}: cannot read it"),
    ]
    for name, text in (("empty", ""), ("blank", " \n\t\n")):
        (tmp_path / name).write_text(text)
        cases.append((None, tmp_path / name, f"--api-key-file {tmp_path / name}: the file is empty"))
    for key, key_file, message in cases:
        with pytest.raises(TinyplmError, match=message.replace("(", r"\(")) as info:
            resolve_api_key(key, key_file)
        assert KEY not in str(info.value)


def test_an_empty_key_file_is_named_on_the_command_line(tmp_path: Path, model_dir: Path) -> None:
    (tmp_path / "key.txt").write_text("\n")
    result = cli(["serve", model_dir, "--port", "0", "--api-key-file", tmp_path / "key.txt"], cwd=tmp_path)
    assert_bad_input(result, "key.txt", "the file is empty")


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.1.2.3", "example.org"))


@pytest.mark.slow
def test_the_key_never_shows_in_the_servers_output(tmp_path: Path, model_dir: Path) -> None:
    (tmp_path / "key.txt").write_text(KEY + "\n")
    near = KEY[:-1] + "X"  # a wrong key that differs in its last character only
    with LiveServer(model_dir, "--api-key-file", str(tmp_path / "key.txt")) as server:
        server.wait_ready(headers=RIGHT)
        for headers in (RIGHT, WRONG, {"Authorization": f"Bearer {near}"}, {"Authorization": f"Basic {KEY}"}, {}):
            resp = httpx.post(server.url + "/predict", json={"text": "a good film"}, headers=headers)
            assert resp.status_code == (200 if headers is RIGHT else 401)
            assert KEY not in resp.text and near not in resp.text
            assert KEY not in str(resp.headers)
        assert httpx.get(server.url + "/nowhere", headers=RIGHT).status_code == 404
        assert server.stop() == 0
    output = server.output()
    assert "API key required except on /health, /metrics and the docs" in output, output
    assert KEY not in output and near not in output, output
    assert '"401": 4' in output, output  # the stop summary counted the refusals


@pytest.mark.slow
def test_a_public_address_without_a_key_is_warned_about(model_dir: Path) -> None:
    with LiveServer(model_dir, "--host", "0.0.0.0") as server:
        server.wait_ready()
    assert "warning: serving on 0.0.0.0 without an API key" in server.output(), server.output()
