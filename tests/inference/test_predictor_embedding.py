"""The Predictor on embedding models (both kinds): vectors equal the embedder's, whatever the
batching, with the model info an embedding model has."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers_embedding import make_sentence_dir, make_static_dir
from helpers_serve import sentences
from tinyplm.errors import TinyplmError
from tinyplm.inference.model_info import model_info
from tinyplm.inference.predictor import Predictor
from tinyplm.inference.records import TextInput, VectorPrediction
from tinyplm.models.embedder import load_embedder
from tinyplm.tasks.heads import Head

MAKERS = {"sentence": make_sentence_dir, "static": make_static_dir}


@pytest.fixture(scope="module", params=sorted(MAKERS))
def embedding_dir(request, tmp_path_factory) -> Path:
    return MAKERS[request.param](tmp_path_factory.mktemp("embed") / request.param)


def test_model_info_finds_the_embedding_head(embedding_dir: Path) -> None:
    info = model_info(embedding_dir)
    assert info.head is Head.EMBEDDING and info.labels == () and not info.is_regression


def test_vectors_equal_the_embedders_in_any_batching(embedding_dir: Path) -> None:
    texts = sentences(23)
    reference = load_embedder(embedding_dir).embed(texts)
    for batch_size in (1, 4, 64):
        predictor = Predictor.load(embedding_dir, batch_size=batch_size)
        preds = predictor.predict([TextInput(t) for t in texts])
        assert all(isinstance(p, VectorPrediction) for p in preds)
        np.testing.assert_allclose(np.array([p.vector for p in preds]), reference, atol=1e-6)
        assert predictor.forward_passes == -(-len(texts) // batch_size)


def test_max_length_is_the_models_own_unless_asked(embedding_dir: Path, tmp_path: Path) -> None:
    predictor = Predictor.load(embedding_dir)
    embedder = load_embedder(embedding_dir)
    if embedder.kind == "static":
        assert predictor.info.max_length is None and "static" in predictor.info.max_length_from
    else:
        assert predictor.info.max_length == 48 and "max_seq_length" in predictor.info.max_length_from
    cut = Predictor.load(embedding_dir, max_length=8)
    assert cut.info.max_length == 8 and cut.info.max_length_from == "--max-length"
    long = " ".join(sentences(6))
    np.testing.assert_allclose(cut.predict([TextInput(long)])[0].vector,
                               load_embedder(embedding_dir, max_length=8).embed([long])[0], atol=1e-6)


def test_token_counts_are_before_any_cut(embedding_dir: Path) -> None:
    predictor = Predictor.load(embedding_dir, max_length=8)
    short, long = predictor.predict([TextInput("the cat"), TextInput(" ".join(sentences(6)))])
    assert 0 < short.tokens < 8 < long.tokens


def test_warm_up_and_a_pair_refused(embedding_dir: Path) -> None:
    predictor = Predictor.load(embedding_dir)
    predictor.warm_up(lengths=(4,), batches=(1, 2))
    assert predictor.forward_passes == 2
    with pytest.raises(TinyplmError, match="one text alone"):
        predictor.predict([TextInput("a", "b")])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(alphabet="abcdefgh xyz", min_size=1, max_size=40), min_size=1, max_size=6))
def test_each_vector_is_its_own_texts(embedding_dir: Path, texts: list[str]) -> None:
    predictor = _cached(embedding_dir)
    together = predictor.predict([TextInput(t) for t in texts])
    for text, pred in zip(texts, together, strict=True):
        np.testing.assert_allclose(pred.vector, predictor.predict([TextInput(text)])[0].vector, atol=1e-5)


_LOADED: dict[Path, Predictor] = {}


def _cached(path: Path) -> Predictor:
    if path not in _LOADED:
        _LOADED[path] = Predictor.load(path, batch_size=3)
    return _LOADED[path]


def test_a_layout_with_its_transformer_in_a_subfolder(tmp_path: Path) -> None:
    """Older sentence-transformers folders keep the encoder in 0_Transformer/ (no config.json at the root)."""
    import json
    import shutil

    root = make_sentence_dir(tmp_path / "st")
    expected = load_embedder(root).embed(sentences(5))
    sub = root / "0_Transformer"
    sub.mkdir()
    for file in list(root.iterdir()):
        if file.is_file() and file.name not in ("modules.json", "config_sentence_transformers.json"):
            shutil.move(file, sub / file.name)
    modules = json.loads((root / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (root / "modules.json").write_text(json.dumps(modules))
    predictor = Predictor.load(root)
    assert predictor.info.head is Head.EMBEDDING and not (root / "config.json").exists()
    np.testing.assert_allclose([p.vector for p in predictor.predict([TextInput(t) for t in sentences(5)])],
                               expected, atol=1e-6)
