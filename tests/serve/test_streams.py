"""Serving an OpenVINO model on streams: several batches in flight, each from its own thread, with
the same answers as one batch at a time; PyTorch models keep one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conftest import make_tiny_model_dir
from helpers_serve import post_all, serving
from tinyplm.compress.openvino import openvino_float
from tinyplm.inference.predictor import Predictor
from tinyplm.inference.records import TextInput
from tinyplm.models import load_classifier, save_model
from tinyplm.serve.app import ServeSettings, create_app

pytest.importorskip("openvino")

TEXTS = ["the film was good", "a dull and lifeless plot that never ends", "great", "bad acting, worse script",
         "an utterly charming and funny little film", "meh"] * 4


@pytest.fixture(scope="module")
def ov_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("streams")
    model, tok = load_classifier(make_tiny_model_dir(root / "torch"), ("0", "1"), False)
    return save_model(openvino_float(model, root / "work", precision="f32"), tok, root / "ov")


def test_one_stream_unless_asked(ov_dir: Path) -> None:
    p = Predictor.load(ov_dir, split_by_length=True)
    _, state = create_app(p, ServeSettings())
    assert state.batcher.workers == 1 and p.streams == 1


def test_a_torch_model_keeps_one_stream_whatever_is_asked(tiny_model_dir: Path) -> None:
    p = Predictor.load(tiny_model_dir, split_by_length=True)
    assert p.use_streams(4) == 1
    _, state = create_app(p, ServeSettings(streams=4))
    assert state.batcher.workers == 1


def test_served_on_two_streams_answers_as_one_pass_at_a_time(ov_dir: Path) -> None:
    expected = Predictor.load(ov_dir, split_by_length=True).predict([TextInput(t) for t in TEXTS])
    p = Predictor.load(ov_dir, batch_size=4, split_by_length=True)
    app, state = create_app(p, ServeSettings(max_batch=4, max_wait_ms=1, streams=2))
    assert state.batcher.workers == 2 and p.streams == 2

    async def scenario():
        return await post_all(app, [{"text": t} for t in TEXTS])

    responses = asyncio.run(serving(app, state, scenario))
    assert [r.status_code for r in responses] == [200] * len(TEXTS)
    for r, want in zip(responses, expected, strict=True):
        got = r.json()["prediction"]
        assert got["label"] == want.label
        assert got["scores"] == pytest.approx(want.scores, abs=1e-5)
    assert p.model._ensure_compiled().get_property("NUM_STREAMS") == 2


def test_streams_below_one_are_refused_by_option_name() -> None:
    from tinyplm.errors import TinyplmError

    with pytest.raises(TinyplmError, match="--streams: expected at least 1"):
        ServeSettings(streams=0).check()
