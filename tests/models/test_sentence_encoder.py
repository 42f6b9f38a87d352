"""SentenceEncoder against sentence-transformers (ST): the same vectors for every pooling mode, with and
without normalisation and Dense layers, on tiny random BERT and MPNet encoders written as ST folders
here; save -> load round trips; read_layout's errors; encode_texts keeps the input order."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from conftest import WORDS, tiny_vocab
from helpers_families import tiny_config, tiny_tokenizer
from tinyplm.errors import ModelError
from tinyplm.models import roles
from tinyplm.models.layout_files import with_paths
from tinyplm.models.loading import resolve_model_dir
from tinyplm.models.pooling import LEGACY_KEYS, Pooling, PoolMode, SentenceLayout, pool, read_layout
from tinyplm.models.sentence import encode_texts, load_sentence_encoder, save_sentence_encoder
from tinyplm.models.shape import SHAPE_KEY, keep_heads, keep_neurons

HIDDEN = 32
TEXTS = ["the movie was good", "", "a", "bad plot but great actor and the best story of the film " * 4,
         "Love IT!", "this is not very fun", "it was awful"]
#: Dense layers (in, out, bias, activation class) an ST model gets, by name.
DENSE = {"none": (), "tanh": ((HIDDEN, 16, True, nn.Tanh),)}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _bert_dir(path: Path, lower: bool = True) -> Path:
    """A tiny random BertModel (vocab 99, hidden 32, 2 layers, 4 heads, FFN 37) and its tokenizer."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=99, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=37, max_position_embeddings=64)).save_pretrained(path)
    BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=lower).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> Path:
    return _bert_dir(tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def mpnet_dir(tmp_path_factory) -> Path:
    """A tiny random MPNetModel, whose tokenizer (like MPNet's) gives no token_type_ids."""
    from transformers import MPNetModel

    path = tmp_path_factory.mktemp("mpnet")
    tok = tiny_tokenizer("wordpiece")
    torch.manual_seed(0)
    MPNetModel(tiny_config("mpnet", len(tok))).save_pretrained(path)
    tok.save_pretrained(path)
    settings_file = path / "tokenizer_config.json"
    config = json.loads(settings_file.read_text())
    settings_file.write_text(json.dumps({**config, "model_input_names": ["input_ids", "attention_mask"]}))
    return path


@pytest.fixture(scope="module")
def mean_model(bert_dir):
    """The tiny BERT under mean pooling and normalisation, given as a layout (the dir has no modules.json)."""
    return load_sentence_encoder(bert_dir, SentenceLayout(Pooling(PoolMode.MEAN), normalize=True))


def _st_model(src: Path, mode: PoolMode, normalize: bool, dense=(), max_seq_length: int | None = 24):
    """An ST model built by ST itself: Transformer(src) -> Pooling(mode) -> Dense... -> Normalize."""
    modules = pytest.importorskip("sentence_transformers.sentence_transformer.modules")
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(1)
    parts = [modules.Transformer(str(src), max_seq_length=max_seq_length), modules.Pooling(HIDDEN, pooling_mode=mode)]
    parts += [modules.Dense(i, o, bias=b, activation_function=act()) for i, o, b, act in dense]
    parts += [modules.Normalize()] if normalize else []
    return SentenceTransformer(modules=parts, device="cpu")


def _st_load(path: Path):
    return pytest.importorskip("sentence_transformers").SentenceTransformer(str(path), device="cpu")


def _assert_same(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.shape == expected.shape and got.dtype == np.float32
    cos = (got * expected).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
    assert cos.min() >= 0.9999, cos
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# vectors: tinyplm == sentence-transformers, and save -> load gives the same vectors


@pytest.mark.parametrize("dense", list(DENSE))
@pytest.mark.parametrize("normalize", [False, True], ids=["raw", "normalized"])
@pytest.mark.parametrize("mode", list(PoolMode))
def test_st_folder_gives_st_vectors_and_round_trips(bert_dir, tmp_path, mode, normalize, dense):
    st_model = _st_model(bert_dir, mode, normalize, DENSE[dense])
    st_model.save(str(tmp_path / "st"), create_model_card=False)
    model, tok = load_sentence_encoder(tmp_path / "st")
    assert (model.layout.pooling.mode, model.layout.normalize, len(model.layout.dense)) == (mode, normalize,
                                                                                             len(DENSE[dense]))
    got = encode_texts(model, tok, TEXTS, batch_size=3)
    _assert_same(got, st_model.encode(TEXTS))

    saved = save_sentence_encoder(model, tok, tmp_path / "ours")
    _assert_same(_st_load(saved).encode(TEXTS), got)
    back, back_tok = load_sentence_encoder(saved)
    assert back.layout == with_paths(model.layout)
    np.testing.assert_array_equal(encode_texts(back, back_tok, TEXTS, batch_size=3), got)


def test_stacked_dense_layers_without_bias(bert_dir, tmp_path):
    dense = ((HIDDEN, 16, False, nn.Identity), (16, 8, True, nn.ReLU))
    st_model = _st_model(bert_dir, PoolMode.CLS, True, dense)
    st_model.save(str(tmp_path / "st"), create_model_card=False)
    model, tok = load_sentence_encoder(tmp_path / "st")
    assert [(d.bias, d.activation.rsplit(".", 1)[-1]) for d in model.layout.dense] == [(False, "Identity"),
                                                                                         (True, "ReLU")]
    assert model.dim == 8
    got = encode_texts(model, tok, TEXTS)
    _assert_same(got, st_model.encode(TEXTS))
    _assert_same(_st_load(save_sentence_encoder(model, tok, tmp_path / "ours")).encode(TEXTS), got)


def test_mpnet_without_token_type_ids(mpnet_dir, tmp_path):
    st_model = _st_model(mpnet_dir, PoolMode.MEAN, True, DENSE["tanh"])
    st_model.save(str(tmp_path / "st"), create_model_card=False)
    model, tok = load_sentence_encoder(tmp_path / "st")
    assert not model.takes_token_types and "token_type_ids" not in tok("a film")
    got = encode_texts(model, tok, TEXTS, batch_size=2)
    _assert_same(got, st_model.encode(TEXTS))
    saved = save_sentence_encoder(model, tok, tmp_path / "ours")
    _assert_same(_st_load(saved).encode(TEXTS), got)
    np.testing.assert_array_equal(encode_texts(*load_sentence_encoder(saved), TEXTS, batch_size=2), got)


def test_transformer_in_a_subfolder(bert_dir, tmp_path):
    """Older ST folders keep the encoder in 0_Transformer; the vectors do not change."""
    st_model = _st_model(bert_dir, PoolMode.MAX, True)
    root = tmp_path / "st"
    st_model.save(str(root), create_model_card=False)
    expected = encode_texts(*load_sentence_encoder(root), TEXTS)
    sub = root / "0_Transformer"
    sub.mkdir()
    for file in root.iterdir():
        if file.is_file() and file.name not in ("modules.json", "config_sentence_transformers.json"):
            shutil.move(file, sub / file.name)
    modules = json.loads((root / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (root / "modules.json").write_text(json.dumps(modules))
    model, tok = load_sentence_encoder(root)
    assert model.layout.transformer_path == "0_Transformer"
    np.testing.assert_array_equal(encode_texts(model, tok, TEXTS), expected)
    _assert_same(_st_load(root).encode(TEXTS), expected)


def test_a_max_seq_length_past_the_positions_is_cut_to_them(bert_dir, tmp_path):
    """A layout declaring more tokens than the encoder has positions (64 here): long texts are read
    at the 64 positions, as the layout would with max_seq_length 64, instead of crashing, and the
    limit says why (what predict and serve print)."""
    from tinyplm.inference.model_info import embedding_limit
    from tinyplm.models.embedder import load_embedder

    for declared in (64, 128):
        root = tmp_path / f"st{declared}"
        _st_model(bert_dir, PoolMode.MEAN, True).save(str(root), create_model_card=False)
        settings_file = root / "sentence_bert_config.json"  # the key as older ST versions write it
        settings_file.write_text(json.dumps({**json.loads(settings_file.read_text()), "max_seq_length": declared}))
    long = [" ".join(["good"] * 200), "a short one"]
    at_64 = encode_texts(*load_sentence_encoder(tmp_path / "st64"), long)
    np.testing.assert_array_equal(encode_texts(*load_sentence_encoder(tmp_path / "st128"), long), at_64)
    limit, source = embedding_limit(load_embedder(tmp_path / "st128"))
    assert limit == 64 and "max_seq_length 128" in source and "64 positions" in source
    assert embedding_limit(load_embedder(tmp_path / "st64")) == (64, "the model's own (max_seq_length, as embed-eval)")


def test_prompts_and_similarity_survive_a_save(bert_dir, tmp_path):
    """An e5-style model's prompts (no default: tinyplm's vectors are ST's without a prompt) and its
    similarity function are written again when it is saved, so its students offer them too."""
    src = tmp_path / "src"
    _st_model(bert_dir, PoolMode.MEAN, False).save(str(src), create_model_card=False)
    settings_file = src / "config_sentence_transformers.json"
    prompts = {"query": "query: ", "passage": "passage: "}
    settings_file.write_text(json.dumps({**json.loads(settings_file.read_text()), "prompts": prompts,
                                         "default_prompt_name": None, "similarity_fn_name": "dot"}))
    model, tok = load_sentence_encoder(src)
    save_sentence_encoder(model, tok, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "config_sentence_transformers.json").read_text())
    assert saved["prompts"] == prompts and saved["similarity_fn_name"] == "dot"
    loaded = _st_load(tmp_path / "out")
    assert {k: loaded.prompts.get(k) for k in prompts} == prompts and loaded.similarity_fn_name == "dot"
    _assert_same(loaded.encode(TEXTS), encode_texts(model, tok, TEXTS))


def test_do_lower_case_lowercases_as_st_does(tmp_path):
    """sentence_bert_config's do_lower_case lower-cases text for a cased tokenizer, in ST and here."""
    src = _bert_dir(tmp_path / "cased", lower=False)
    _st_model(src, PoolMode.MEAN, True).save(str(tmp_path / "st"), create_model_card=False)
    (tmp_path / "st" / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 24,
                                                                           "do_lower_case": True}))
    model, tok = load_sentence_encoder(tmp_path / "st")
    assert model.layout.do_lower_case and model.layout.max_seq_length == 24
    shouted = [t.upper() for t in TEXTS]
    got = encode_texts(model, tok, shouted)
    _assert_same(got, _st_load(tmp_path / "st").encode(shouted))
    np.testing.assert_allclose(got, encode_texts(model, tok, [t.lower() for t in TEXTS]), atol=1e-6)


def test_pruned_encoder_round_trips(bert_dir, tmp_path):
    """A pruned encoder (heads and FFN neurons removed) saves its shape and loads to the same vectors."""
    _st_model(bert_dir, PoolMode.MEAN, True, DENSE["tanh"]).save(str(tmp_path / "st"), create_model_card=False)
    model, tok = load_sentence_encoder(tmp_path / "st")
    layer = roles.layers(model.encoder)[0]
    keep_heads(layer, [0, 2], HIDDEN // 4)
    keep_neurons(layer, range(20))
    got = encode_texts(model, tok, TEXTS)
    saved = save_sentence_encoder(model, tok, tmp_path / "pruned")
    assert SHAPE_KEY in json.loads((saved / "config.json").read_text())
    np.testing.assert_array_equal(encode_texts(*load_sentence_encoder(saved), TEXTS), got)


# ---------------------------------------------------------------------------------------------
# pooling arithmetic


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 4), st.integers(1, 7), st.data(), st.booleans())
def test_pool_equals_st_pooling(batch, seq, data, left):
    """Every mode, right or left padding: the same numbers as ST's Pooling module."""
    modules = pytest.importorskip("sentence_transformers.sentence_transformer.modules")
    lengths = data.draw(st.lists(st.integers(1, seq), min_size=batch, max_size=batch))
    hidden = torch.randn(batch, seq, 8, generator=torch.Generator().manual_seed(data.draw(st.integers(0, 99))))
    mask = torch.tensor([[int(j < n) for j in range(seq)] for n in lengths])
    mask = mask.flip(1) if left else mask
    for mode in PoolMode:
        theirs = modules.Pooling(8, pooling_mode=mode)({"token_embeddings": hidden, "attention_mask": mask})
        assert torch.equal(pool(hidden, mask, Pooling(mode)), theirs["sentence_embedding"]), mode


def test_pool_modes_by_hand():
    """Rows of two real tokens and one padding token whose value would dominate if it were read."""
    hidden = torch.tensor([[[1.0, -2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    h0, h1 = hidden[0, 0], hidden[0, 1]
    expected = {PoolMode.MEAN: (h0 + h1) / 2, PoolMode.MEAN_SQRT_LEN_TOKENS: (h0 + h1) / 2 ** 0.5,
                PoolMode.CLS: h0, PoolMode.LASTTOKEN: h1, PoolMode.MAX: torch.maximum(h0, h1),
                PoolMode.WEIGHTEDMEAN: (1 * h0 + 2 * h1) / 3}
    for mode, want in expected.items():
        torch.testing.assert_close(pool(hidden, mask, Pooling(mode))[0], want)


# ---------------------------------------------------------------------------------------------
# read_layout: what it reads and what it refuses


def _minimal(root: Path) -> Path:
    """modules.json (Transformer, Pooling, Normalize) and a mean pooling config; no encoder needed."""
    root.mkdir(parents=True, exist_ok=True)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    (root / "modules.json").write_text(json.dumps(modules))
    (root / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": HIDDEN, **{key: mode is PoolMode.MEAN for key, mode in LEGACY_KEYS.items()}}
    (root / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return root


def test_read_layout_reads_the_minimal_layout(tmp_path):
    layout = read_layout(_minimal(tmp_path / "m"))
    assert layout == SentenceLayout(Pooling(PoolMode.MEAN, dimension=HIDDEN), normalize=True)
    assert read_layout(tmp_path) is None  # no modules.json: no layout


def _edit(path: Path, change) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def _dense_without_weights(root: Path) -> None:
    _edit(root / "modules.json", lambda m: [*m[:2], {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])
    (root / "2_Dense").mkdir()
    (root / "2_Dense" / "config.json").write_text(json.dumps({"in_features": HIDDEN, "out_features": 4}))


#: case -> (how to break the minimal layout, the file named, words the message holds).
BROKEN = {
    "malformed json": (lambda r: (r / "modules.json").write_text('[{"path": "",'), "modules.json", ["not valid JSON"]),
    "two modes": (lambda r: _edit(r / "1_Pooling" / "config.json", lambda c: {**c, "pooling_mode_cls_token": True}),
                  "1_Pooling/config.json", ["pooling_mode_cls_token and pooling_mode_mean_tokens", "one"]),
    "no mode": (lambda r: _edit(r / "1_Pooling" / "config.json", lambda c: {**c, "pooling_mode_mean_tokens": False}),
                "1_Pooling/config.json", ["no pooling mode is true", "pooling_mode_mean_tokens"]),
    "mode not a bool": (lambda r: _edit(r / "1_Pooling" / "config.json",
                                        lambda c: {**c, "pooling_mode_mean_tokens": "yes"}),
                        "1_Pooling/config.json", ["pooling_mode_mean_tokens", "expected true or false"]),
    "no pooling config": (lambda r: (r / "1_Pooling" / "config.json").unlink(), "1_Pooling/config.json", ["missing"]),
    "unknown type": (lambda r: _edit(r / "modules.json", lambda m: [*m[:2], {**m[2], "type":
                                                                            "sentence_transformers.models.CNN"}]),
                     "modules.json", ["[2].type", "'sentence_transformers.models.CNN'", "not supported",
                                      "sentence_transformers.models.Dense"]),
    "custom code": (lambda r: _edit(r / "modules.json", lambda m: [*m[:2], {**m[2], "type": "my_pkg.Custom"}]),
                    "modules.json", ["'my_pkg.Custom'", "sentence_transformers.models.Pooling"]),
    "wrong order": (lambda r: _edit(r / "modules.json", lambda m: [m[0], m[2], m[1]]), "modules.json",
                    ["[1].type", "Normalize module after Transformer"]),
    "missing path": (lambda r: _edit(r / "modules.json", lambda m: [{"type": m[0]["type"]}, *m[1:]]),
                     "modules.json", ["[0]", "'path'"]),
    "dense without weights": (_dense_without_weights, "2_Dense", ["no weights", "model.safetensors"]),
    "default prompt": (lambda r: (r / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: "}, "default_prompt_name": "query"})), "config_sentence_transformers.json",
        ["default_prompt_name", "prompt"]),
    "default naming no prompt": (lambda r: (r / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: "}, "default_prompt_name": "classification"})),
        "config_sentence_transformers.json", ["'classification' names no prompt", "'query'"]),
    "sparse encoder": (lambda r: (r / "config_sentence_transformers.json").write_text(json.dumps(
        {"model_type": "SparseEncoder"})), "config_sentence_transformers.json", ["model_type", "'SparseEncoder'"]),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_read_layout_errors_name_the_file_and_key(tmp_path, case):
    root = _minimal(tmp_path / "m")
    breaks, file, words = BROKEN[case]
    breaks(root)
    with pytest.raises(ModelError) as info:
        read_layout(root)
    message = str(info.value)
    assert str(root / file) in message, message
    for word in words:
        assert word in message, (word, message)


def test_plain_encoder_dir_is_refused_without_a_layout(bert_dir, mean_model):
    with pytest.raises(ModelError) as info:
        load_sentence_encoder(bert_dir)
    message = str(info.value)
    for words in (str(bert_dir), "no modules.json", "never assumed", "layout="):
        assert words in message, message
    # given a layout it loads: the mean of the encoder's real token vectors, L2-normalised
    from transformers import AutoModel

    model, tok = mean_model
    batch = tok(TEXTS, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        hidden = AutoModel.from_pretrained(str(bert_dir)).eval()(**batch).last_hidden_state
    weights = batch["attention_mask"].unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1)
    np.testing.assert_allclose(encode_texts(model, tok, TEXTS), expected.numpy(), atol=1e-5)


# ---------------------------------------------------------------------------------------------
# encode_texts and the atomic save


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(WORDS), max_size=14).map(" ".join), max_size=9), st.integers(1, 4))
def test_encode_texts_keeps_input_order(mean_model, texts, batch_size):
    model, tok = mean_model
    got = encode_texts(model, tok, texts, batch_size=batch_size)
    assert got.shape == (len(texts), model.dim) and got.dtype == np.float32
    for row, text in zip(got, texts, strict=True):
        np.testing.assert_allclose(row, encode_texts(model, tok, [text])[0], atol=1e-5)


def test_encode_texts_of_nothing_and_mode_restored(mean_model):
    model, tok = mean_model
    model.train()
    assert encode_texts(model, tok, []).shape == (0, model.dim)
    assert encode_texts(model, tok, ["a film"]).shape == (1, model.dim) and model.training
    model.eval()


def test_save_is_atomic(mean_model, tmp_path, monkeypatch):
    """An existing folder is replaced whole; a save that fails half way leaves it as it was."""
    model, tok = mean_model
    out = tmp_path / "emb"
    save_sentence_encoder(model, tok, out)
    (out / "marker").write_text("first")
    save_sentence_encoder(model, tok, out)
    assert not (out / "marker").exists() and (out / "modules.json").is_file()
    (out / "marker").write_text("second")

    def broken(layout):
        raise RuntimeError("disk full")

    monkeypatch.setattr("tinyplm.models.sentence.layout_json", broken)
    with pytest.raises(RuntimeError):
        save_sentence_encoder(model, tok, out)
    assert (out / "marker").read_text() == "second"
    monkeypatch.undo()
    save_sentence_encoder(model, tok, out)  # the half-written copy of the failed save is cleared
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb"]


# ---------------------------------------------------------------------------------------------
# the packaged MiniLM


@pytest.mark.integration
def test_packaged_minilm_reads_its_layout_and_gives_st_vectors():
    try:
        path = resolve_model_dir("minilm-l6")
    except ModelError as exc:
        pytest.skip(f"the packaged MiniLM is absent: {exc}")
    layout = read_layout(path)
    settings_file = json.loads((path / "sentence_bert_config.json").read_text())
    assert layout.pooling.mode is PoolMode.MEAN and layout.normalize and layout.dense == ()
    assert layout.max_seq_length == settings_file["max_seq_length"]
    sentences = ["A man is playing a guitar.", "The weather is lovely today.", "Compressing encoders keeps them fast.",
                 "short"]
    model, tok = load_sentence_encoder(path)
    got = encode_texts(model, tok, sentences, batch_size=2)
    expected = _st_load(path).encode(sentences)
    cos = (got * expected).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
    assert got.shape == (len(sentences), 384) and cos.min() >= 0.999, cos


def test_weights_that_do_not_fit_the_config_are_named_by_tensor(tmp_path):
    """A sentence encoder whose config.json says another vocab_size than its weights hold: transformers'
    error pointed at a report tinyplm keeps quiet; the tensor and both shapes are named instead."""
    from helpers_embedding import make_sentence_dir

    folder = make_sentence_dir(tmp_path / "st")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "vocab_size": 50}))
    with pytest.raises(ModelError, match=r"model\.safetensors: does not fit .*config\.json: tensor "
                                         r"\S*word_embeddings\.weight is \[99, 32\] in the file but \[50, 32\]"):
        load_sentence_encoder(folder)


def test_a_tokenizer_that_pads_on_the_left_gives_each_text_its_own_vector(mean_model) -> None:
    """A tokenizer saved with padding_side left shifted every shorter text's positions by its
    padding (absolute positions), so a text's vector depended on the texts batched with it."""
    model, tok = mean_model
    tok = copy.copy(tok)
    tok.padding_side = "left"
    alone = encode_texts(model, tok, TEXTS, batch_size=1)
    np.testing.assert_allclose(encode_texts(model, tok, TEXTS, batch_size=len(TEXTS)), alone, atol=1e-5)
    assert tok.padding_side == "left"  # the caller's tokenizer is not changed


def test_a_lower_cased_tokenizer_lower_cases_once_saved(tmp_path) -> None:
    """lowercase() put a Lowercase normalizer in front but left do_lower_case false, and transformers
    rebuilds a BERT tokenizer's normalizer from that setting when it loads: a student saved with the
    tokenizer read capitals in tinyplm (as [UNK]) and lower-cased in sentence-transformers."""
    from transformers import BertTokenizerFast

    from tinyplm.models.loading import load_tokenizer
    from tinyplm.models.sentence import lowercase

    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate([*tiny_vocab(), "café", "cafe"])}, do_lower_case=False)
    assert tok("The MOVIE")["input_ids"] != tok("the movie")["input_ids"]
    lowercase(tok)
    assert tok("The MOVIE")["input_ids"] == tok("the movie")["input_ids"]
    read = tok.convert_ids_to_tokens(tok("Café")["input_ids"])
    assert read == ["[CLS]", "café", "[SEP]"]  # lower-cased, its accent kept (as ST's lower() reads it)
    tok.save_pretrained(tmp_path)
    back = load_tokenizer(tmp_path, len(tok))
    assert back("The MOVIE")["input_ids"] == back("the movie")["input_ids"]
    assert back.convert_ids_to_tokens(back("Café")["input_ids"]) == read  # and so once saved
