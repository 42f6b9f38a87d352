"""The vector endpoints of an embedding model: ``POST /embed`` in TEI's shape (httpx) and
``POST /v1/embeddings`` through the ``openai`` package itself, pointed at a live ``tinyplm serve``;
both give the embedder's vectors, go through the batcher (503 on a full queue), the API key and the
body limits; a classifier's server says it has none."""

from __future__ import annotations

import asyncio
import base64
import os
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from conftest import make_tiny_model_dir
from helpers_embedding import make_sentence_dir, make_static_dir
from helpers_live import LiveServer
from helpers_serve import fastapi_app, serving
from tinyplm.inference.predictor import Predictor
from tinyplm.models.embedder import load_embedder
from tinyplm.serve.api import Limits
from tinyplm.serve.app import ServeSettings, create_app

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MAKERS = {"sentence": make_sentence_dir, "static": make_static_dir}
TEXTS = ["the cat sat on the mat", "a dog", "hello world of tiny models"]
KEY = "embed-key-4c2b"


@pytest.fixture(scope="module", params=sorted(MAKERS))
def embedding_dir(request, tmp_path_factory) -> Path:
    return MAKERS[request.param](tmp_path_factory.mktemp("serve-embed") / request.param)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def cosines(a, b) -> np.ndarray:
    return (unit(np.asarray(a, dtype=np.float64)) * unit(np.asarray(b, dtype=np.float64))).sum(-1)


def call(path: Path, requests: list[tuple[str, dict]], settings: ServeSettings | None = None) -> list[httpx.Response]:
    """POST each ``(route, body)`` in turn to an in-process server of ``path``."""
    app, state = create_app(Predictor.load(path), settings or ServeSettings(warm_up=False))

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return [await c.post(route, json=body) for route, body in requests]

    return asyncio.run(serving(app, state, scenario))


def test_tei_embed_gives_the_embedders_vectors(embedding_dir: Path) -> None:
    reference = load_embedder(embedding_dir).embed(TEXTS)
    many, one, raw = call(embedding_dir, [("/embed", {"inputs": TEXTS}), ("/embed", {"inputs": TEXTS[1]}),
                                          ("/embed", {"inputs": TEXTS, "normalize": False})])
    assert many.status_code == one.status_code == raw.status_code == 200, many.text
    vectors = np.array(many.json())
    assert vectors.shape == reference.shape and many.headers["x-batch-size"] == "3"
    np.testing.assert_allclose(vectors, unit(reference), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.array(one.json()), unit(reference[1:2]), atol=1e-5)
    np.testing.assert_allclose(np.array(raw.json()), reference, atol=1e-5)


def test_a_text_over_the_limit_is_refused_unless_truncated(tmp_path: Path) -> None:
    path = make_sentence_dir(tmp_path / "s")  # a limit of 48 tokens
    long = " ".join(["cat"] * 60)
    refused, cut, openai = call(path, [("/embed", {"inputs": ["a dog", long]}),
                                       ("/embed", {"inputs": long, "truncate": True}),
                                       ("/v1/embeddings", {"input": long, "model": "m"})])
    embedder = load_embedder(path)
    (problem,) = refused.json()["problems"]
    assert refused.status_code == 413 and problem["field"] == "inputs[1]" and "truncate" in problem["expected"]
    assert problem["got"] == f"{len(embedder.tokenizer(long)['input_ids'])} tokens"
    assert cut.status_code == 200
    np.testing.assert_allclose(cut.json()[0], unit(embedder.embed([long]))[0], atol=1e-5)
    assert openai.status_code == 413 and openai.json()["problems"][0]["field"] == "input"


def test_openai_shape_encodings_and_dimensions(embedding_dir: Path) -> None:
    reference = unit(load_embedder(embedding_dir).embed(TEXTS))
    plain, packed, short, tokens, wide = call(embedding_dir, [
        ("/v1/embeddings", {"input": TEXTS, "model": "mine"}),
        ("/v1/embeddings", {"input": TEXTS[0], "model": "mine", "encoding_format": "base64", "user": "u"}),
        ("/v1/embeddings", {"input": TEXTS, "model": "mine", "dimensions": 4}),
        ("/v1/embeddings", {"input": [[1, 2, 3]], "model": "mine"}),
        ("/v1/embeddings", {"input": TEXTS, "model": "mine", "dimensions": reference.shape[1] + 1})])
    body = plain.json()
    assert plain.status_code == 200 and body["object"] == "list" and body["model"] == "mine"
    assert [d["index"] for d in body["data"]] == [0, 1, 2] and body["usage"]["prompt_tokens"] > 3
    np.testing.assert_allclose([d["embedding"] for d in body["data"]], reference, atol=1e-5)
    decoded = np.frombuffer(base64.b64decode(packed.json()["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, reference[0], atol=1e-6)
    np.testing.assert_allclose([d["embedding"] for d in short.json()["data"]], unit(reference[:, :4]), atol=1e-5)
    assert tokens.status_code == 422 and tokens.json()["problems"][0]["field"] == "input[0]"
    assert wide.status_code == 422 and wide.json()["problems"][0]["field"] == "dimensions"


def test_predict_answers_the_vector(embedding_dir: Path) -> None:
    (answer,) = call(embedding_dir, [("/predict", {"inputs": [{"text": t} for t in TEXTS]})])
    vectors = [p["vector"] for p in answer.json()["predictions"]]
    np.testing.assert_allclose(vectors, load_embedder(embedding_dir).embed(TEXTS), atol=1e-5)


def test_a_classifier_has_no_vector_endpoints(tmp_path: Path) -> None:
    path = make_tiny_model_dir(tmp_path / "clf")
    tei, openai = call(path, [("/embed", {"inputs": "a"}), ("/v1/embeddings", {"input": "a", "model": "m"})])
    for answer in (tei, openai):
        assert answer.status_code == 404 and "embedding models" in answer.json()["error"]
        assert "sequence head" in answer.json()["error"]
    app, _ = create_app(Predictor.load(path), ServeSettings(warm_up=False))
    assert not {"/embed", "/v1/embeddings"} & set(fastapi_app(app).openapi()["paths"])


def test_a_full_queue_answers_503_on_the_vector_routes(tmp_path: Path) -> None:
    gate = threading.Event()
    predictor = Predictor.load(make_static_dir(tmp_path / "s"))
    embed, calls = predictor.model.embed, []

    def held(texts):
        calls.append(len(texts))
        gate.wait(10)
        return embed(texts)

    app, state = create_app(predictor, ServeSettings(max_batch=1, max_queue=1, max_wait_ms=0,
                                                     limits=Limits(max_texts=1), warm_up=False))

    async def scenario():
        predictor.model.embed = held  # from here on, batches wait for the gate
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            first = asyncio.create_task(c.post("/embed", json={"inputs": "a"}))
            while not calls:
                await asyncio.sleep(0.01)
            second = asyncio.create_task(c.post("/v1/embeddings", json={"input": "b", "model": "m"}))
            while state.batcher.depth < 1:
                await asyncio.sleep(0.01)
            start = time.perf_counter()
            third = await c.post("/v1/embeddings", json={"input": "c", "model": "m"})
            fourth = await c.post("/embed", json={"inputs": "d"})
            refused_in = time.perf_counter() - start
            gate.set()
            return third, fourth, refused_in, await first, await second

    third, fourth, refused_in, first, second = asyncio.run(serving(app, state, scenario))
    for refused in (third, fourth):
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert refused.json()["kind"] == "queue_full"
    assert refused_in < 1.0 and first.status_code == second.status_code == 200


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A live ``tinyplm serve`` of a tiny sentence model, with an API key."""
    path = make_sentence_dir(tmp_path_factory.mktemp("live-embed") / "s")
    with LiveServer(path, "--max-wait-ms", "1", env={"TINYPLM_API_KEY": KEY}) as server:
        server.wait_ready(headers={"Authorization": f"Bearer {KEY}"})
        yield server, path


#: None: the package's default, which asks for base64 and decodes it itself; "base64" given: it hands the text on.
@pytest.mark.parametrize("encoding", [None, "float", "base64"])
def test_the_openai_package_gets_tinyplms_vectors(live, encoding: str | None) -> None:
    import openai

    server, path = live
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    asked = {"encoding_format": encoding} if encoding else {}
    result = client.embeddings.create(model="tiny", input=TEXTS, **asked)
    got = [d.embedding for d in result.data]
    if encoding == "base64":
        got = [np.frombuffer(base64.b64decode(text), dtype="<f4") for text in got]
    assert [d.index for d in result.data] == [0, 1, 2] and result.usage.prompt_tokens > 0
    assert cosines(got, load_embedder(path).embed(TEXTS)).min() >= 0.999
    assert cosines(client.embeddings.create(model="tiny", input=TEXTS, dimensions=8).data[0].embedding,
                   load_embedder(path).embed(TEXTS[:1])[0, :8]) >= 0.999


def test_the_live_server_wants_the_key(live) -> None:
    import openai

    server, _ = live
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.embeddings.create(model="tiny", input="a dog")
    assert httpx.post(server.url + "/embed", json={"inputs": "a dog"}).status_code == 401
    tei = httpx.post(server.url + "/embed", json={"inputs": TEXTS}, headers={"Authorization": f"Bearer {KEY}"})
    assert tei.status_code == 200 and len(tei.json()) == 3
