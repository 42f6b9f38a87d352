"""load_embedder: either kind of embedding model dir loads as a texts -> vectors callable equal to
its own encoder's; anything else is refused naming the dir and what was expected."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import WORDS, make_tiny_model_dir
from helpers_embedding import make_sentence_dir, make_static_dir
from tinyplm.errors import ModelError, TinyplmError
from tinyplm.models.embedder import EmbedderKind, load_embedder

TEXTS = ["the movie was good", "", "a bad plot but a great actor " * 5, "love it"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[EmbedderKind, Path]:
    root = tmp_path_factory.mktemp("embedders")
    return {EmbedderKind.TRANSFORMER: make_sentence_dir(root / "sentence"),
            EmbedderKind.STATIC: make_static_dir(root / "static")}


@pytest.mark.parametrize("kind", list(EmbedderKind))
def test_each_kind_loads_and_embeds_unit_vectors_in_input_order(dirs, kind):
    embedder = load_embedder(dirs[kind])
    assert embedder.kind is kind
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), embedder.dim) and vectors.dtype == np.float32
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms[norms > 0], 1.0, atol=1e-5)  # both tiny models normalise
    one_by_one = np.stack([embedder.embed([t])[0] for t in TEXTS])
    assert np.allclose(vectors, one_by_one, atol=1e-5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.lists(st.sampled_from(WORDS), max_size=30).map(" ".join), max_size=12),
       batch=st.integers(1, 5))
def test_transformer_vectors_do_not_depend_on_the_batch(dirs, texts, batch):
    """Length-sorted batches of any size give each text the vector it gets alone."""
    embedder = load_embedder(dirs[EmbedderKind.TRANSFORMER], batch_size=batch)
    vectors = embedder.embed(texts)
    assert vectors.shape == (len(texts), embedder.dim)
    for i, text in enumerate(texts[:3]):
        assert np.allclose(vectors[i], embedder.embed([text])[0], atol=1e-5)


def test_max_length_cuts_the_texts(dirs):
    long = " ".join(WORDS * 3)
    short = load_embedder(dirs[EmbedderKind.TRANSFORMER], max_length=6).embed([long])
    full = load_embedder(dirs[EmbedderKind.TRANSFORMER]).embed([long])
    assert not np.allclose(short, full)


def test_a_max_length_past_the_positions_is_refused_at_load(dirs):
    """Before, embed-eval --max-length 100 on a 64-position encoder read and embedded its sets, then
    crashed in the encoder at the first long text."""
    path = dirs[EmbedderKind.TRANSFORMER]
    with pytest.raises(TinyplmError, match=r"--max-length 100 is longer than the 64 positions the encoder of .* "
                                           r"reads; give at most 64"):
        load_embedder(path, max_length=100)
    assert load_embedder(path, max_length=64).embed([" ".join(WORDS * 3)]).shape[0] == 1
    assert load_embedder(dirs[EmbedderKind.STATIC], max_length=1000).max_length == 1000  # reads every piece


def test_a_classifier_dir_is_refused_naming_what_was_expected(tmp_path):
    path = make_tiny_model_dir(tmp_path / "classifier")
    with pytest.raises(ModelError, match="not an embedding model: expected modules.json"):
        load_embedder(path)


def test_bad_settings_are_refused_before_loading(dirs):
    with pytest.raises(TinyplmError, match="max_length must be at least 1"):
        load_embedder(dirs[EmbedderKind.STATIC], max_length=0)
    with pytest.raises(TinyplmError, match="batch_size must be at least 1"):
        load_embedder(dirs[EmbedderKind.STATIC], batch_size=0)


def test_the_role_table_and_the_logit_path_reach_into_a_sentence_encoder(dirs):
    """roles.base_model finds a SentenceEncoder's encoder (so layers, heads and shapes are read as on a
    classifier), and predict_logits gives its vectors in input order, as encode_texts does."""
    from tinyplm.models import roles, shape_of
    from tinyplm.models.infer import predict_logits
    from tinyplm.tasks.base import Example, Split
    from tinyplm.tasks.encoding import encode_split
    from tinyplm.tasks.heads import Head

    embedder = load_embedder(dirs[EmbedderKind.TRANSFORMER])
    model = embedder.model
    assert roles.base_model(model) is model.encoder
    assert len(roles.layers(model)) == 2 and shape_of(model)["layers"] == 2 and roles.is_encoder(model)
    split = Split("dev", [Example(t, None, None) for t in TEXTS], Path("<test>"), Head.EMBEDDING)
    vectors = predict_logits(model, encode_split(split, embedder.tokenizer, 48), batch_size=2)
    assert np.allclose(vectors.numpy(), embedder.embed(TEXTS), atol=1e-5)


def test_the_run_paths_load_and_save_an_embedding_model(dirs, tmp_path):
    """load_for_head with the embedding head gives the embedding model its dir holds and refuses a
    classifier's dir by name, and save_model writes a SentenceEncoder in the sentence-transformers
    layout, complete, with the same vectors."""
    from tinyplm.models import save_model
    from tinyplm.models.head_loading import load_for_head as load_classifier
    from tinyplm.models.io import is_complete
    from tinyplm.models.sentence import SentenceEncoder
    from tinyplm.tasks.heads import Head

    model, tok = load_classifier(dirs[EmbedderKind.TRANSFORMER], (), False, Head.EMBEDDING)
    assert isinstance(model, SentenceEncoder)
    out = save_model(model, tok, tmp_path / "saved")
    assert (out / "modules.json").is_file() and is_complete(out)
    again = load_embedder(out)
    assert again.kind is EmbedderKind.TRANSFORMER
    assert np.allclose(again.embed(TEXTS), load_embedder(dirs[EmbedderKind.TRANSFORMER]).embed(TEXTS), atol=1e-6)
    static, _ = load_classifier(dirs[EmbedderKind.STATIC], (), False, Head.EMBEDDING)
    assert type(static).__name__ == "StaticSentenceEncoder"
    with pytest.raises(ModelError, match="not an embedding model"):
        load_classifier(make_tiny_model_dir(tmp_path / "classifier"), (), False, "embedding")
    classifier, _ = load_classifier(tmp_path / "classifier", ("neg", "pos"), False, "sequence")
    assert classifier.config.num_labels == 2
