"""The static sentence encoder (``models.classic.static_sentence``) on tiny tokenizers and a stand-in
teacher (a fixed random vector per piece): its forward and the numpy path agree, its table is the
teacher's piece vectors reduced by PCA, a saved dir loads back identically and sentence-transformers
reads it to the same vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import WORDS
from helpers_families import tiny_tokenizer
from tinyplm.errors import ModelError, TinyplmError
from tinyplm.models.classic.static_init import pca_table, piece_weights
from tinyplm.models.classic.static_sentence import (
    EMBEDDINGS,
    SENTENCE_MODEL_TYPE,
    encode_static,
    is_static_sentence_dir,
    load_static_sentence,
    save_static_sentence,
    sentence_batch,
    static_sentence_student,
)

HIDDEN = 12
#: Texts with the cases that break a pooled mean: empty, only unknown pieces, specials typed in.
EDGES = ["", "☃ ☃", "the movie was good", "bad plot ☃ and dull !", "<s> fun </s>", "   ", "Great FILM, not awful"]
TEXTS = st.one_of(st.lists(st.sampled_from([*WORDS, "☃", "€€", "Zebra", "qx", "!", "<unk>", "<s>", ""]),
                           max_size=9).map(" ".join),
                  st.text(max_size=16))


class StandIn:
    """The teacher's vector of each piece: fixed random ``(vocab, HIDDEN)`` rows; records its calls."""

    def __init__(self, vocab: int, seed: int = 0) -> None:
        self.vectors = np.random.default_rng(seed).normal(size=(vocab, HIDDEN)).astype(np.float32)
        self.calls: list[list[int]] = []

    def __call__(self, ids):
        self.calls.append(list(ids))
        return self.vectors[list(ids)]


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer("wordpiece")


def _model(tok, dims=8, weighting="zipf", normalize=True, kept=None, table_dtype="fp32", counts=None):
    kept = range(len(tok)) if kept is None else kept
    return static_sentence_student(StandIn(len(tok)), tok, dims, weighting, kept, counts, normalize,
                                   table_dtype=table_dtype)


@pytest.fixture(scope="module")
def models(tok):
    return {True: _model(tok, normalize=True), False: _model(tok, normalize=False, kept=range(5, 40))}


@torch.no_grad()
def _forward(model, tok, texts, max_length=None) -> np.ndarray:
    return model(**sentence_batch(tok, texts, max_length)).numpy()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXTS, min_size=1, max_size=6), normalize=st.booleans(),
       max_length=st.none() | st.integers(1, 4))
def test_the_numpy_path_equals_the_forward(models, tok, texts, normalize, max_length):
    model = models[normalize]
    fast = encode_static(model, tok, texts, max_length)
    assert fast.shape == (len(texts), 8) and fast.dtype == np.float32
    np.testing.assert_allclose(fast, _forward(model, tok, texts, max_length), rtol=1e-5, atol=1e-6)


def test_a_vector_is_the_weighted_sum_over_the_count_of_pieces_by_hand(models, tok):
    model = models[False]
    table, w, row_of = model.table.weight.detach().numpy(), model.token_weights.numpy(), model.row_of.numpy()
    for text in EDGES:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        rows = row_of[ids]
        want = (w[rows, None] * table[rows]).sum(0) / max(1, len(ids)) if ids else np.zeros(8, np.float32)
        np.testing.assert_allclose(encode_static(model, tok, [text], None)[0], want, rtol=1e-5, atol=1e-7)
    unknown = encode_static(model, tok, ["☃ ☃", "", "good ☃"], None)
    assert not unknown[:2].any() and unknown[2].any()  # unknown pieces add nothing; empty text is 0
    assert np.isclose(np.linalg.norm(encode_static(models[True], tok, ["good film"], None)), 1.0)


def test_normalised_it_is_the_weighted_mean(models, tok):
    model = models[True]
    ids = tok("the plot was very dull ☃", add_special_tokens=False)["input_ids"]
    rows = model.row_of.numpy()[ids]
    w = model.token_weights.numpy()[rows]
    mean = (w[:, None] * model.table.weight.detach().numpy()[rows]).sum(0) / w.sum()
    got = encode_static(model, tok, ["the plot was very dull ☃"], None)[0]
    np.testing.assert_allclose(got, mean / np.linalg.norm(mean), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("weighting", ["zipf", "sif", "mean"])
def test_the_table_is_the_pca_of_the_pieces_teacher_vectors(tok, weighting):
    teacher = StandIn(len(tok), seed=3)
    kept = [7, 9, 11, 30, 31, 32, 40, 41, 50, 60]
    counts = np.arange(len(tok)) % 5
    model = static_sentence_student(teacher, tok, 6, weighting, kept, counts, True)
    ids = sorted(set(kept) | set(tok.all_special_ids))
    assert teacher.calls == [ids]  # one call, the specials included
    table, _ = pca_table(teacher.vectors[ids], 6)
    np.testing.assert_allclose(model.table.weight.detach().numpy(), table, atol=1e-5)
    want = piece_weights(weighting, ids, counts, set(tok.all_special_ids), 1e-3)
    np.testing.assert_array_equal(model.token_weights.numpy(), want)
    assert not model.token_weights[[ids.index(i) for i in tok.all_special_ids]].any()
    row_of = model.row_of.numpy()
    assert [row_of[i] for i in ids] == list(range(len(ids)))
    assert (row_of[[i for i in range(len(tok)) if i not in ids]] == ids.index(tok.unk_token_id)).all()


@pytest.mark.parametrize(("args", "message"), [
    ({"dims": 20, "kept": [10, 11, 12]}, "dims 20 is more than the 8 pieces kept"),
    ({"dims": HIDDEN + 1}, f"dims {HIDDEN + 1}: PCA of .* at most {HIDDEN} components"),
    ({"weighting": "sif"}, "weighting sif needs counts"),
    ({"weighting": "idf"}, "weighting 'idf' is not one of"),
    ({"kept": [3, 999]}, "kept: id 999 is not a piece"),
    ({"counts": np.ones(5)}, r"counts: shape \(5,\)"),
])
def test_bad_arguments_are_refused_naming_them(tok, args, message):
    teacher = StandIn(len(tok))
    options = {"dims": 4, "weighting": "zipf", "kept": range(len(tok)), "counts": None, **args}
    with pytest.raises(TinyplmError, match=message):
        static_sentence_student(teacher, tok, options["dims"], options["weighting"], options["kept"],
                                options["counts"], True)
    if args.get("dims") == 20:
        assert teacher.calls == []  # refused before any teacher pass


@pytest.mark.parametrize("table_dtype", ["fp32", "fp16", "int8"])
def test_save_and_load_give_identical_vectors(tok, tmp_path, table_dtype):
    model = _model(tok, kept=range(0, 60), table_dtype=table_dtype)
    out = save_static_sentence(model, tok, tmp_path / "enc")
    assert is_static_sentence_dir(out) and (out / ".complete").is_file()
    assert not list(tmp_path.glob(".*tmp")) and not list(out.rglob("*.bin"))
    loaded, loaded_tok = load_static_sentence(out)
    assert loaded.config.table_dtype == table_dtype and loaded.config.model_type == SENTENCE_MODEL_TYPE
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    np.testing.assert_array_equal(_forward(loaded, loaded_tok, EDGES), _forward(model, tok, EDGES))
    save_static_sentence(loaded, loaded_tok, out)  # replaces the dir in place
    np.testing.assert_array_equal(encode_static(load_static_sentence(out)[0], tok, EDGES, None),
                                  encode_static(model, tok, EDGES, None))


def test_an_int8_table_is_close_to_fp32(tok, tmp_path):
    fp32 = _model(tok, table_dtype="fp32")
    int8 = _model(tok, table_dtype="int8")
    int8, _ = load_static_sentence(save_static_sentence(int8, tok, tmp_path / "q"))
    from safetensors.torch import load_file

    assert load_file(str(tmp_path / "q" / "model.safetensors"))[EMBEDDINGS].dtype == torch.int8
    step = fp32.table.weight.detach().abs().amax(1, keepdim=True) / 127
    assert ((int8.table.weight - fp32.table.weight).abs() <= step / 2 + 1e-6).all()
    a, b = encode_static(fp32, tok, EDGES, None), encode_static(int8, tok, EDGES, None)
    nonzero = np.linalg.norm(a, axis=1) > 0
    assert ((a[nonzero] * b[nonzero]).sum(1) > 0.999).all() and not b[~nonzero].any()


@pytest.mark.parametrize(("kind", "normalize", "table_dtype"), [("wordpiece", True, "fp32"),
                                                                ("wordpiece", False, "int8"),
                                                                ("unigram", True, "fp16"), ("bpe", False, "fp32")])
def test_sentence_transformers_reads_the_same_vectors(tmp_path, monkeypatch, kind, normalize, table_dtype):
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    kind_tok = tiny_tokenizer(kind)
    kind_tok(["a long text to cut at two pieces"], truncation=True, max_length=2)  # leaves truncation set
    model = _model(kind_tok, kept=range(0, len(kind_tok), 2), normalize=normalize, table_dtype=table_dtype)
    out = save_static_sentence(model, kind_tok, tmp_path / "st")
    assert json.loads((out / "tokenizer.json").read_text())["truncation"] is None
    modules = json.loads((out / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["StaticEmbedding", "Normalize"][:1 + normalize]
    texts = [*EDGES, "the worst story , not fun but a very good actor in it " * 4]
    theirs = SentenceTransformer(str(out), device="cpu").encode(texts, convert_to_numpy=True)
    ours = encode_static(load_static_sentence(out)[0], kind_tok, texts, None)
    np.testing.assert_allclose(theirs, ours, rtol=1e-4, atol=1e-6)
    live = np.linalg.norm(ours, axis=1) > 0
    cos = (theirs[live] * ours[live]).sum(1) / np.linalg.norm(theirs[live], axis=1) / np.linalg.norm(ours[live], axis=1)
    assert live.sum() >= 4 and (cos >= 0.999).all()


def test_a_foreign_or_damaged_dir_is_refused_naming_the_file(tok, tmp_path):
    out = save_static_sentence(_model(tok, table_dtype="int8"), tok, tmp_path / "enc")
    from safetensors.torch import load_file, save_file

    state = load_file(str(out / "model.safetensors"))
    save_file({k: v for k, v in state.items() if k != "table.scale"}, str(out / "model.safetensors"))
    with pytest.raises(ModelError, match=r"model\.safetensors: does not fit .*'table\.scale'"):
        load_static_sentence(out)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    assert not is_static_sentence_dir(out)
    with pytest.raises(ModelError, match=r"config\.json: model_type 'bert', not 'tinyplm_static_sentence'"):
        load_static_sentence(out)
    with pytest.raises(ModelError, match="config.json"):
        load_static_sentence(tmp_path / "nowhere")
