"""The HTTP service in process: endpoints, batching, back-pressure, validation, metrics."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from conftest import make_tiny_model_dir
from helpers_serve import CountingModel, make_tiny_head_dir, post_all, serving
from tinyplm.inference.predictor import Predictor
from tinyplm.serve.api import Limits
from tinyplm.serve.app import ServeSettings, create_app


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_tiny_model_dir(tmp_path_factory.mktemp("serve") / "m")


def predictor(model_dir: Path, gate: threading.Event | None = None, max_batch: int = 32) -> Predictor:
    p = Predictor.load(model_dir, batch_size=max_batch, split_by_length=True)
    p.model = CountingModel(p.model, gate)
    return p


def wait_ready(client: TestClient) -> None:
    for _ in range(200):
        if client.get("/ready").status_code == 200:
            return
        time.sleep(0.02)
    raise AssertionError("never ready")


@pytest.fixture
def client(model_dir: Path):
    app, state = create_app(predictor(model_dir), ServeSettings(limits=Limits(max_body_bytes=2000, max_texts=3,
                                                                               max_chars=50)))
    with TestClient(app) as c:
        wait_ready(c)
        c.state = state
        yield c


def test_endpoints(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready").json()
    assert ready["ready"] and ready["head"] == "sequence" and ready["max_batch"] == 32 and ready["max_texts"] == 3
    one = client.post("/predict", json={"text": "a good film"})
    assert one.status_code == 200 and {"label", "scores"} <= set(one.json()["prediction"])
    timing = dict(part.strip().split(";dur=") for part in one.headers["server-timing"].split(","))
    assert set(timing) == {"queue", "infer", "app"} and float(timing["app"]) >= float(timing["infer"])
    many = client.post("/predict", json={"inputs": [{"text": "good"}, {"text": "bad", "text_pair": "plot"}]})
    assert many.status_code == 200 and len(many.json()["predictions"]) == 2
    assert client.get("/docs").status_code == 200
    assert "/predict" in client.get("/openapi.json").json()["paths"]


@pytest.mark.parametrize(("body", "status", "field", "expected"), [
    (b'{"text": ', 400, "body", "a JSON body"),
    (b'{}', 422, "text", "required"),
    (b'{"text": 3}', 422, "text", "a string"),
    (b'{"text": "  "}', 422, "text", "a visible character"),
    (b'{"txt": "a"}', 422, "txt", "no such field"),
    (b'{"inputs": []}', 422, "inputs", "at least 1"),
    (b'{"inputs": [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}]}', 422, "inputs", "at most 3"),
    (b'{"inputs": [{"text": "a"}, {"text": 5}]}', 422, "inputs[1].text", "a string"),
    (b'{"text": "' + b"x" * 51 + b'"}', 422, "text", "at most 50 characters"),
    (b'["a"]', 422, "body", "a JSON object"),
    (b'{"text": "' + b"x" * 3000 + b'"}', 413, "body", "at most 2000 bytes"),
])
def test_client_mistakes_are_4xx_naming_the_field(client: TestClient, body: bytes, status: int, field: str,
                                                   expected: str) -> None:
    resp = client.post("/predict", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == status, resp.text
    problems = resp.json()["problems"]
    assert any(p["field"] == field and expected in p["expected"] for p in problems), problems


def test_metrics_count_requests_errors_and_batches(client: TestClient) -> None:
    client.post("/predict", json={"text": "good"})
    client.post("/predict", json={"text": 1})
    text = client.get("/metrics").text
    assert 'tinyplm_requests_total{path="/predict",status="200"} 1.0' in text
    assert 'tinyplm_requests_total{path="/predict",status="422"} 1.0' in text
    assert 'tinyplm_request_errors_total{kind="validation"} 1.0' in text
    assert "tinyplm_batch_size_count 1.0" in text and "tinyplm_examples_total 1.0" in text
    assert "tinyplm_queue_depth 0.0" in text and "tinyplm_ready 1.0" in text
    for name in ("request", "queue", "inference", "http"):
        assert f"tinyplm_{name}_seconds_count 1.0" in text
    assert client.state.tally.accepted == client.state.tally.answered


async def _counted(p: Predictor, coro):
    """``coro``'s result, with the model's call log holding only the calls made meanwhile."""
    p.model.calls.clear()  # the warm-up's
    return await coro


def test_concurrent_requests_share_one_forward_pass(model_dir: Path) -> None:
    p = predictor(model_dir)
    app, state = create_app(p, ServeSettings(max_batch=2, max_wait_ms=5000))
    bodies = [{"text": "the film was good"}, {"text": "the plot was dull"}]  # alike lengths: one group
    responses = asyncio.run(serving(app, state, lambda: _counted(p, post_all(app, bodies))))
    assert [r.status_code for r in responses] == [200, 200]
    assert p.model.calls == [2]  # one forward pass holding both
    assert [r.headers["x-batch-size"] for r in responses] == ["2", "2"]


def test_without_batching_each_request_has_its_own_pass(model_dir: Path) -> None:
    p = predictor(model_dir, max_batch=1)
    app, state = create_app(p, ServeSettings(max_batch=1, max_wait_ms=5000))
    bodies = [{"text": "good"}, {"text": "bad"}]
    responses = asyncio.run(serving(app, state, lambda: _counted(p, post_all(app, bodies))))
    assert [r.status_code for r in responses] == [200, 200] and p.model.calls == [1, 1]


def test_a_full_queue_answers_503_at_once_and_the_rest_are_served(model_dir: Path) -> None:
    gate = threading.Event()
    p = predictor(model_dir, max_batch=1)
    app, state = create_app(p, ServeSettings(max_batch=1, max_queue=1, max_wait_ms=0, limits=Limits(max_texts=1),
                                             warm_up=False))

    async def scenario():
        p.model.gate = gate  # from here on, forward passes wait for the gate
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            first = asyncio.create_task(c.post("/predict", json={"text": "a"}))  # in flight, held
            while not p.model.calls:
                await asyncio.sleep(0.01)
            second = asyncio.create_task(c.post("/predict", json={"text": "b"}))  # queued: the queue is full
            while state.batcher.depth < 1:
                await asyncio.sleep(0.01)
            start = time.perf_counter()
            third = await c.post("/predict", json={"text": "c"})
            refused_in = time.perf_counter() - start
            gate.set()
            return third, refused_in, await first, await second

    third, refused_in, first, second = asyncio.run(serving(app, state, scenario))
    assert third.status_code == 503 and third.headers["retry-after"] == "1" and refused_in < 1.0
    assert third.json()["kind"] == "queue_full"
    assert first.status_code == second.status_code == 200
    assert 'tinyplm_request_errors_total{kind="queue_full"} 1.0' in state.metrics.text().decode()


@pytest.mark.parametrize(("settings", "option"), [
    (ServeSettings(max_wait_ms=float("inf")), "--max-wait-ms"),
    (ServeSettings(max_wait_ms=float("nan")), "--max-wait-ms"),
    (ServeSettings(timeout_s=float("inf")), "--timeout"), (ServeSettings(timeout_s=float("nan")), "--timeout")])
def test_an_endless_or_nan_wait_or_timeout_is_refused(settings: ServeSettings, option: str) -> None:
    """A wait of inf or NaN held a lone request after a batch of several until its timeout (504), and
    a NaN timeout failed in the event loop's timer: each is refused up front, naming the option."""
    from tinyplm.errors import TinyplmError

    with pytest.raises(TinyplmError, match=f"{option}: expected a finite"):
        settings.check()


def test_a_request_past_its_timeout_gets_504(model_dir: Path) -> None:
    gate = threading.Event()
    p = predictor(model_dir)
    app, state = create_app(p, ServeSettings(timeout_s=0.2, warm_up=False))

    async def scenario():
        p.model.gate = gate
        responses = await post_all(app, [{"text": "a"}])
        gate.set()
        return responses[0]

    resp = asyncio.run(serving(app, state, scenario))
    assert resp.status_code == 504 and resp.json()["kind"] == "timeout"


def test_not_ready_until_warmed_up(model_dir: Path) -> None:
    gate = threading.Event()
    p = predictor(model_dir, gate)  # warm-up waits for the gate
    app, state = create_app(p, ServeSettings())
    with TestClient(app) as c:
        assert c.get("/ready").status_code == 503 and c.get("/health").status_code == 200
        resp = c.post("/predict", json={"text": "a"})
        assert resp.status_code == 503 and resp.json()["kind"] == "not_ready" and resp.headers["retry-after"]
        gate.set()
        wait_ready(c)
        assert c.post("/predict", json={"text": "a"}).status_code == 200


def test_span_and_token_models(tmp_path: Path) -> None:
    qa = Predictor.load(make_tiny_head_dir(tmp_path / "qa", "span"))
    app, _ = create_app(qa, ServeSettings())
    with TestClient(app) as c:
        wait_ready(c)
        resp = c.post("/predict", json={"question": "who", "context": "the actor was good", "id": "x"})
        got = resp.json()["prediction"]
        assert got["id"] == "x" and "the actor was good"[got["start"]:got["end"]] == got["answer"]
        assert c.post("/predict", json={"question": "who"}).json()["problems"][0]["field"] == "context"
        numbered = c.post("/predict", json={"question": "who", "context": "the actor", "id": 7})  # predict takes it
        assert numbered.status_code == 200 and numbered.json()["prediction"]["id"] == "7"
        assert c.post("/predict", json={"question": "who", "context": "the actor", "id": True}).status_code == 422
    ner = Predictor.load(make_tiny_head_dir(tmp_path / "ner", "token"))
    app, _ = create_app(ner, ServeSettings())
    with TestClient(app) as c:
        wait_ready(c)
        tags = c.post("/predict", json={"inputs": [{"tokens": ["the", "actor"]}, {"text": "a good film"}]}).json()
        assert [len(p["tags"]) for p in tags["predictions"]] == [2, 3]
        assert c.post("/predict", json={"tokens": ["a b"]}).status_code == 422
        for space in ("\u00a0", "\u3000", "a\u2009b"):  # Unicode spaces, refused in a word as predict refuses them
            assert c.post("/predict", json={"tokens": ["the", space]}).status_code == 422
        assert c.post("/predict", json={"text": "\u00a0\u2003"}).status_code == 422
        # zero-width characters alone are an empty text (BERT's normaliser deletes them), as predict has it
        invisible = c.post("/predict", json={"text": "\u200b \ufeff\u200d"})
        assert invisible.status_code == 422 and "visible character" in invisible.json()["problems"][0]["expected"]
        assert c.post("/predict", json={"tokens": ["the", "\u200b"]}).status_code == 422
        joined = c.post("/predict", json={"tokens": ["the", "\U0001f469\u200d\U0001f4bb"]})  # ZWJ inside a word
        assert joined.status_code == 200 and len(joined.json()["prediction"]["tags"]) == 2


def test_an_example_that_does_not_fit_the_models_pairs_is_a_422_naming_text_pair(tmp_path: Path) -> None:
    """A run's SST-2 model given a text_pair, or its MRPC model given a text alone, answered a
    prediction that meant nothing, with 200: each is a 422 naming the example's text_pair."""
    import yaml

    for task, good, bad in (("sst2", {"text": "a"}, {"text": "a", "text_pair": "b"}),
                            ("mrpc", {"text": "a", "text_pair": "b"}, {"text": "a"})):
        run = tmp_path / task
        run.mkdir()
        (run / "config.resolved.yaml").write_text(yaml.safe_dump({"name": "t", "task": {"name": task}}))
        make_tiny_model_dir(run / "model")
        app, _ = create_app(Predictor.load(run), ServeSettings())
        with TestClient(app) as c:
            wait_ready(c)
            assert c.post("/predict", json=good).status_code == 200
            one, many = c.post("/predict", json=bad), c.post("/predict", json={"inputs": [good, bad]})
            assert one.status_code == many.status_code == 422
            assert one.json()["problems"][0]["field"] == "text_pair"
            problem = many.json()["problems"][0]
            assert problem["field"] == "inputs[1].text_pair" and f"trained for {task}" in problem["expected"]
            assert c.get("/ready").json()["pairs"] is (task == "mrpc")


def test_a_body_that_stalls_is_a_408_within_the_timeout(model_dir: Path) -> None:
    """A client that sends part of its body and stalls held its connection as long as it liked and,
    at SIGTERM, held the server up for its grace period, then was cancelled with a traceback in the
    log: past the request timeout it is answered 408 and its connection closed."""
    app, state = create_app(predictor(model_dir), ServeSettings(timeout_s=0.2))
    sent: list[dict] = []
    parts = [{"type": "http.request", "body": b'{"text": ', "more_body": True}]

    async def receive() -> dict:
        if parts:
            return parts.pop()
        await asyncio.sleep(30)  # the rest never comes
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/predict", "headers": [(b"content-type", b"application/json")]}
    started = time.perf_counter()
    asyncio.run(app(scope, receive, send))
    assert time.perf_counter() - started < 5
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert b'"kind":"body_timeout"' in sent[1]["body"]
    assert 'tinyplm_request_errors_total{kind="body_timeout"} 1.0' in state.metrics.text().decode()


BODY_PARTS = [b'{"text":', b' "a good', b" slow", b" film", b'"}']


def trickled(parts: list[bytes], every_s: float, stall: bool):
    """An ASGI ``receive`` sending ``parts`` one every ``every_s`` (the first at once), then (``stall``)
    never the rest."""
    queue = list(parts)

    async def receive() -> dict:
        if not queue:
            await asyncio.sleep(30)  # the rest never comes
            return {"type": "http.disconnect"}
        if len(queue) < len(parts):
            await asyncio.sleep(every_s)
        body = queue.pop(0)
        return {"type": "http.request", "body": body, "more_body": stall or bool(queue)}

    return receive


def post_trickled(model_dir: Path, timeout_s: float, receive) -> tuple[list[dict], float]:
    """The messages the app sends for a ``/predict`` whose body ``receive`` gives, and the seconds it took."""
    app, state = create_app(predictor(model_dir), ServeSettings(timeout_s=timeout_s))
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/predict", "headers": [(b"content-type", b"application/json")]}

    async def scenario() -> float:
        started = time.perf_counter()
        await app(scope, receive, send)
        return time.perf_counter() - started

    return sent, asyncio.run(serving(app, state, scenario))


def test_a_slow_but_steady_body_is_served_past_the_timeout(model_dir: Path) -> None:
    """The body timeout counted from the request's start, so a client uploading slowly but steadily
    (under 100 KB/s with the defaults) got a 408: each part arriving within the timeout of the one
    before keeps the request alive, however long the whole body takes."""
    sent, took = post_trickled(model_dir, 1.0, trickled(BODY_PARTS, 0.4, stall=False))
    assert took > 1.5  # the whole body took longer than the timeout
    assert sent[0]["status"] == 200, sent
    assert b'"prediction"' in b"".join(m.get("body", b"") for m in sent[1:])


def test_a_body_that_stops_midway_is_a_408_a_timeout_after_its_last_part(model_dir: Path) -> None:
    """A client that sends parts steadily and then stalls gets its 408 once no part has come for the
    timeout: after its last part, not after the request's start."""
    sent, took = post_trickled(model_dir, 1.0, trickled(BODY_PARTS[:3], 0.4, stall=True))
    assert 1.7 < took < 5  # last part at 0.8 s, then 1 s idle
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert b"no part of the request body arrived for 1 s" in sent[1]["body"]


def test_a_client_that_goes_away_is_not_answered_and_its_work_is_given_up(model_dir: Path) -> None:
    """A client that closed its connection still had its request computed (and counted answered):
    abandoned heavy requests held the model until their deadlines while live clients got 504s."""
    from helpers_serve import post_all, serving

    app, state = create_app(predictor(model_dir), ServeSettings())
    run, calls = state.batcher.run, []

    def slow(items):
        calls.append(len(items))
        time.sleep(0.3)
        return run(items)

    state.batcher.run = slow
    sent: list[dict] = []
    messages = [{"type": "http.disconnect"}, {"type": "http.request", "body": b'{"text": "a good film"}'}]

    async def receive() -> dict:
        return messages.pop()

    async def send(message: dict) -> None:
        sent.append(message)

    async def scenario():
        scope = {"type": "http", "method": "POST", "path": "/predict",
                 "headers": [(b"content-type", b"application/json")]}
        started = time.perf_counter()
        await app(scope, receive, send)
        gone_after = time.perf_counter() - started
        live = await post_all(app, [{"text": "a good film"}])
        return gone_after, live

    gone_after, live = asyncio.run(serving(app, state, scenario))
    assert sent == [] and gone_after < 0.25  # nobody to answer: the handler returns at the disconnect
    assert live[0].status_code == 200 and state.batcher.depth == 0
