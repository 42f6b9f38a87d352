"""Static students over the teacher's word pieces (``static``, ``static_cnn``, ``static_bilstm``) on a tiny random
BERT: the table made the Model2Vec way (pass-through vectors, PCA, piece weights), padding never
changing a logit, the table stored as fp32 / fp16 / int8 and loaded back, ONNX export, and the
recipe's checks of the ``family.static`` options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import make_tiny_model_dir, tiny_recipe, write_recipe
from tinyplm.config import load_recipe
from tinyplm.config.classic import StaticSpec
from tinyplm.errors import ModelError, RecipeError
from tinyplm.models.classic import load_family
from tinyplm.models.classic.static import pack_table, unpack_table
from tinyplm.models.classic.static_init import (
    LstmShape,
    TrainingPieces,
    contextual_vectors,
    frame,
    passthrough_vectors,
    pca_table,
    piece_weights,
    static_student,
)
from tinyplm.models.io import save_model
from tinyplm.models.loading import load_classifier

TEXTS = ["the movie was good", "bad plot and dull", "a great fun film", "the worst story , not fun"]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A tiny random BERT encoder (vocab 99, hidden 32) and its WordPiece tokenizer."""
    from transformers import AutoModel, AutoTokenizer

    src = make_tiny_model_dir(tmp_path_factory.mktemp("bert") / "bert")
    return AutoModel.from_pretrained(str(src)).eval(), AutoTokenizer.from_pretrained(str(src))


def _pieces(tok, texts=TEXTS) -> TrainingPieces:
    return TrainingPieces(tok(texts)["input_ids"])


def _batch(tok, texts=TEXTS):
    return dict(tok(texts, padding=True, return_tensors="pt"))


def _student(teacher, arch: str, lstm: LstmShape | None = None, **options):
    encoder, tok = teacher
    torch.manual_seed(0)
    if arch == "static_bilstm":  # a BiLSTM's width is its LSTM's, not a ReLU layer's
        options.pop("hidden", None), options.pop("hidden_layers", None), options.pop("filters", None)
    spec = StaticSpec(**{"dims": 8, **options})
    model, info = static_student(encoder, tok, arch, spec, _pieces(tok), 2, dropout=0.0,
                                 lstm=lstm or LstmShape(hidden=6))
    return model.eval(), info


ARCHS = ["static", "static_cnn", "static_bilstm"]


def test_a_pieces_vector_is_the_teachers_output_at_its_position(teacher):
    encoder, tok = teacher
    before, after = frame(tok)
    assert (before, after) == ([tok.cls_token_id], [tok.sep_token_id])
    ids = [tok.convert_tokens_to_ids(t) for t in ("good", "movie", "##s", "[UNK]")]
    got = passthrough_vectors(encoder, tok, ids, batch_size=3)  # two batches
    assert got.shape == (4, 32) and got.dtype == np.float32
    for row, i in enumerate(ids):
        with torch.no_grad():
            alone = encoder(input_ids=torch.tensor([[tok.cls_token_id, i, tok.sep_token_id]])).last_hidden_state
        np.testing.assert_allclose(got[row], alone[0, 1].numpy(), atol=1e-5, rtol=0)


def test_pca_keeps_the_first_components_and_all_of_them_are_a_rotation():
    rng = np.random.default_rng(0)
    vectors = (rng.normal(size=(50, 12)) * np.linspace(3, 0.1, 12)).astype(np.float32)
    table, kept = pca_table(vectors, 4)
    assert table.shape == (50, 4) and table.dtype == np.float32 and 0.5 < kept < 1.0
    cov = np.cov(table.T)
    np.testing.assert_allclose(table.mean(0), 0, atol=1e-5)  # centred
    np.testing.assert_allclose(cov - np.diag(np.diag(cov)), 0, atol=1e-4)  # uncorrelated components
    assert list(np.diag(cov)) == sorted(np.diag(cov), reverse=True)
    full, kept = pca_table(vectors, 12)
    dist = lambda x: np.linalg.norm(x[:, None] - x[None], axis=-1)  # noqa: E731
    np.testing.assert_allclose(dist(full), dist(vectors), atol=1e-4)
    assert kept == pytest.approx(1.0)
    with pytest.raises(ValueError, match="dims 13: PCA of 50 vectors of width 12 gives at most 12"):
        pca_table(vectors, 13)


def test_piece_weights_by_hand():
    counts = np.array([5, 0, 3, 1, 0, 0])  # id 0 a special token, never counted as text
    w = piece_weights("sif", [0, 2, 3, 4], counts, {0}, a=0.5)
    np.testing.assert_allclose(w, [0.0, 0.5 / (0.5 + 3 / 4), 0.5 / (0.5 + 1 / 4), 1.0], rtol=1e-6)
    z = piece_weights("zipf", [1, 5], counts, {0}, a=0.1)
    inv = 1 / np.arange(2, 8)
    np.testing.assert_allclose(z, 0.1 / (0.1 + inv[[1, 5]] / inv.sum()), rtol=1e-6)
    assert piece_weights("mean", [0, 1], counts, {0}, a=0.1).tolist() == [0.0, 1.0]


def test_the_table_holds_the_used_pieces_reduced_by_pca(teacher):
    encoder, tok = teacher
    model, info = _student(teacher, "static", weighting="sif")
    used = sorted({i for ids in _pieces(tok).task for i in ids} | set(tok.all_special_ids))
    assert info["pieces"] == len(used) == model.config.table_rows and info["vocabulary"] == 99
    assert model.table.weight.shape == (len(used), 8)
    expected, _ = pca_table(passthrough_vectors(encoder, tok, used), 8)
    torch.testing.assert_close(model.table.weight.detach(), torch.from_numpy(expected), atol=1e-6, rtol=0)
    good, unseen = tok.convert_tokens_to_ids("good"), tok.convert_tokens_to_ids("hate")
    assert unseen not in used and int(model.row_of[unseen]) == used.index(tok.unk_token_id)
    assert int(model.row_of[good]) == used.index(good)
    weights = model.token_weights
    assert all(float(weights[used.index(s)]) == 0.0 for s in tok.all_special_ids)
    the, good_w = float(weights[used.index(tok.convert_tokens_to_ids("the"))]), float(weights[used.index(good)])
    assert 0 < the < good_w < 1  # 'the' is used twice, 'good' once
    assert model.table.weight.requires_grad
    frozen, _ = _student(teacher, "static_cnn", freeze=True, tokens="all")
    assert frozen.config.table_rows == 99 and not frozen.table.weight.requires_grad


def test_a_contextual_vector_is_the_mean_of_the_pieces_states_over_the_texts(teacher):
    encoder, tok = teacher
    texts = _pieces(tok).task
    the, fun, unseen = (tok.convert_tokens_to_ids(t) for t in ("the", "fun", "hate"))
    kept = [tok.cls_token_id, the, fun, unseen]
    means, counts = contextual_vectors(encoder, texts, kept, batch_size=3)  # padded batches of 3 and 1
    assert counts.tolist() == [4, 2, 2, 0] and means.shape == (4, 32) and means.dtype == np.float32
    expected = np.zeros(32)
    for ids in texts:  # each text alone, unpadded
        with torch.no_grad():
            states = encoder(input_ids=torch.tensor([ids])).last_hidden_state[0]
        expected += sum(states[k].double().numpy() for k, i in enumerate(ids) if i == the)
    np.testing.assert_allclose(means[1], expected / 2, atol=1e-5, rtol=0)
    assert not means[3].any()
    first, counted = contextual_vectors(encoder, texts, kept, max_texts=1)
    assert counted.tolist() == [1, 1, 0, 0]


def test_a_contextual_table_pools_the_used_pieces_and_keeps_the_rest_passthrough(teacher):
    encoder, tok = teacher
    model, info = _student(teacher, "static_cnn", vectors="contextual", tokens="all")
    used = {i for ids in _pieces(tok).task for i in ids}
    assert info["contextual_pieces"] == len(used) and model.config.table_rows == 99
    means, counts = contextual_vectors(encoder, _pieces(tok).task, list(range(99)))
    vectors = np.where((counts > 0)[:, None], means, passthrough_vectors(encoder, tok, list(range(99))))
    expected, _ = pca_table(vectors, 8)
    torch.testing.assert_close(model.table.weight.detach(), torch.from_numpy(expected), atol=1e-5, rtol=0)
    plain, plain_info = _student(teacher, "static_cnn", tokens="all")
    assert plain_info["contextual_pieces"] == 0 and not torch.allclose(plain.table.weight, model.table.weight)


@pytest.mark.parametrize("arch", ARCHS)
def test_padding_never_changes_a_logit(teacher, arch):
    model, _ = _student(teacher, arch, hidden=6, filters=[(1, 4), (5, 4)]) if arch == "static_cnn" else \
        _student(teacher, arch, hidden=6)
    _, tok = teacher
    together = model(**_batch(tok)).logits
    assert together.shape == (4, 2)
    for i, text in enumerate(TEXTS):  # alone: no padding; a sentence shorter than the widest filter too
        torch.testing.assert_close(model(**_batch(tok, [text])).logits[0], together[i], atol=1e-6, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_word_dropout_varies_training_logits_only_and_is_saved(teacher, arch, tmp_path):
    _, tok = teacher
    model, _ = _student(teacher, arch, word_dropout=0.5, filters=[(2, 4)]) if arch == "static_cnn" else \
        _student(teacher, arch, word_dropout=0.5)
    batch = _batch(tok)
    assert model.config.word_dropout == 0.5
    evaluated = model(**batch).logits
    torch.testing.assert_close(model(**batch).logits, evaluated, atol=0, rtol=0)  # eval: every piece read
    model.train()
    torch.manual_seed(1)
    dropped = [model(**batch).logits for _ in range(3)]
    assert not torch.allclose(dropped[0], dropped[1]) and not torch.allclose(dropped[0], evaluated)
    model.eval()
    save_model(model, tok, tmp_path / "m")
    assert load_classifier(tmp_path / "m", ("0", "1"), False, "sequence")[0].config.word_dropout == 0.5


@pytest.mark.parametrize("arch", ["static", "static_cnn"])
def test_stacked_hidden_layers_are_built_saved_and_loaded_back(teacher, arch, tmp_path):
    _, tok = teacher
    model, _ = _student(teacher, arch, hidden=6, hidden_layers=3, filters=[(2, 4)])
    linears = [m for m in model.head if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(8 if arch == "static" else 4, 6), (6, 6),
                                                                  (6, 6), (6, 2)]
    save_model(model, tok, tmp_path / "m")
    loaded = load_classifier(tmp_path / "m", ("0", "1"), False, "sequence")[0].eval()
    assert loaded.config.hidden_layers == 3
    torch.testing.assert_close(loaded(**_batch(tok)).logits, model(**_batch(tok)).logits, atol=1e-6, rtol=0)
    one, _ = _student(teacher, arch, hidden=6)  # the default: one layer, named as before the option existed
    assert [k for k in one.state_dict() if k.startswith("head.")] == ["head.1.weight", "head.1.bias",
                                                                      "head.4.weight", "head.4.bias"]
    with pytest.raises(ValueError, match="family.static.hidden_layers: 2 layers of width 0"):
        StaticSpec(hidden_layers=2)


def test_a_bilstm_students_lstm_takes_its_shape_and_is_saved_and_loaded_back(teacher, tmp_path):
    from tinyplm.models.classic.config import family_shape

    _, tok = teacher
    model, _ = _student(teacher, "static_bilstm", lstm=LstmShape(hidden=5, layers=2, pooling="attention"))
    lstm = model.head.lstm
    assert [(m.input_size, m.hidden_size) for m in lstm.forward_layers] == [(8, 5), (10, 5)]
    assert [(m.input_size, m.hidden_size) for m in lstm.backward_layers] == [(8, 5), (10, 5)]
    assert model.head.pool.kind == "attention" and model.head.classifier.in_features == 10
    save_model(model, tok, tmp_path / "m")
    loaded = load_classifier(tmp_path / "m", ("0", "1"), False, "sequence")[0].eval()
    torch.testing.assert_close(loaded(**_batch(tok)).logits, model(**_batch(tok)).logits, atol=1e-6, rtol=0)
    assert family_shape(loaded.config) == {"arch": "static_bilstm", "dims": 8, "rows": model.config.table_rows,
                                           "table": "fp32", "layers": 2, "hidden": 5, "pooling": "attention"}
    reversed_words = model(**_batch(tok, ["fun not bad"])).logits, model(**_batch(tok, ["bad not fun"])).logits
    assert not torch.allclose(*reversed_words)  # it reads the order of the pieces, which a bag does not


def test_a_bilstm_recipe_takes_the_lstm_options_and_refuses_the_relu_ones(tmp_path: Path) -> None:
    family = {"arch": "static_bilstm", "hidden": 64, "layers": 2, "pooling": "mean", "static": {"dims": 16}}
    recipe = tiny_recipe(tmp_path, tmp_path, tmp_path, students=[{"name": "s", "family": family}])
    fam = load_recipe(write_recipe(tmp_path / "r.yaml", recipe)).students[0].family
    assert (fam.hidden, fam.lstm_layers, fam.pooling, fam.static.dims) == (64, 2, "mean", 16)
    for static, message in (({"hidden": 64}, "family.static.hidden is for arch static / static_cnn, not static_bilstm"),
                            ({"filters": [[2, 8]]}, "family.static.filters is for arch static_cnn, not static_bilstm")):
        recipe = tiny_recipe(tmp_path, tmp_path, tmp_path,
                             students=[{"name": "s", "family": {"arch": "static_bilstm", "static": static}}])
        with pytest.raises(RecipeError, match=message):
            load_recipe(write_recipe(tmp_path / "r.yaml", recipe))


def test_int8_packing_keeps_each_row_within_half_a_step():
    w = torch.tensor([[1.0, -0.5, 0.25], [0.0, 0.0, 0.0], [-3.0, 2.0, 0.001]])
    packed = pack_table(w, "int8")
    assert packed["table.qweight"].dtype == torch.int8 and packed["table.scale"].shape == (3,)
    back = unpack_table(packed, "int8")
    assert torch.equal(back[1], torch.zeros(3))  # an all-zero row stays zeros
    assert ((back - w).abs() <= packed["table.scale"].unsqueeze(1) / 2 + 1e-7).all()
    assert float(back[2, 0]) == -3.0  # the largest entry of a row is exact
    with pytest.raises(RuntimeError, match="no tensor 'table.scale'"):
        unpack_table({"table.qweight": packed["table.qweight"]}, "int8")


@pytest.mark.parametrize("arch", ARCHS)
def test_save_and_load_round_trip_per_table_dtype(teacher, arch, tmp_path):
    _, tok = teacher
    sizes, batch = {}, _batch(tok, [*TEXTS, "words it never saw : hate love"])
    for dtype in ("fp32", "fp16", "int8"):
        model, _ = _student(teacher, arch, dims=32, tokens="all", table_dtype=dtype, hidden=8)
        trained = model(**batch).logits  # as it left training (the table in fp32)
        save_model(model, tok, tmp_path / dtype)
        kept = model(**batch).logits  # the model the run keeps: its table rounded as it was stored
        loaded, tok2 = load_classifier(tmp_path / dtype, ("0", "1"), False, "sequence")
        assert type(loaded) is type(model) and loaded.config.table_dtype == dtype
        assert torch.equal(loaded(**_batch(tok2, [*TEXTS, "words it never saw : hate love"])).logits, kept)
        if dtype == "fp32":
            assert torch.equal(kept, trained)
        else:
            torch.testing.assert_close(kept, trained, atol=2e-2 if dtype == "int8" else 2e-3, rtol=0)
        assert loaded.num_parameters() == model.num_parameters() > 0
        sizes[dtype] = (tmp_path / dtype / "model.safetensors").stat().st_size
    table = 99 * 32  # entries: 4, 2 or 1 byte each (int8 adds a 4-byte scale per row)
    assert sizes["int8"] < sizes["fp16"] < sizes["fp32"]
    assert sizes["fp32"] - sizes["int8"] >= 3 * table - 99 * 4 - 256  # (less what the headers differ by)


@pytest.mark.parametrize("arch", ARCHS)
def test_onnx_export_matches_torch(teacher, arch, tmp_path):
    from tinyplm.compress.onnx_quant import onnx_fp32

    model, _ = _student(teacher, arch, table_dtype="int8")
    _, tok = teacher
    save_model(model, tok, tmp_path / "m")  # rounds the table to int8 steps
    (tmp_path / "graph").mkdir()
    ort = onnx_fp32(model, tmp_path / "graph")
    batch = _batch(tok)
    torch.testing.assert_close(ort(**batch).logits, model(**batch).logits, atol=1e-5, rtol=1e-4)
    save_model(ort, tok, tmp_path / "onnx")
    loaded, _ = load_classifier(tmp_path / "onnx", ("0", "1"), False, "sequence")
    torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits, atol=1e-5, rtol=1e-4)


def test_a_damaged_or_foreign_dir_is_refused_naming_the_file(teacher, tmp_path):
    import json

    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    _, tok = teacher
    model, _ = _student(teacher, "static", table_dtype="int8")
    folder = save_model(model, tok, tmp_path / "m")
    whole = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in whole.items() if k != "table.scale"}, str(folder / "model.safetensors"))
    with pytest.raises(ModelError, match=r"model.safetensors: does not fit .*no tensor 'table.scale'"):
        load_family(folder, ("0", "1"))
    save_file(whole, str(folder / "model.safetensors"))
    other = AutoTokenizer.from_pretrained(str(folder))
    other.add_tokens(["zzword", "yyword"])
    other.save_pretrained(folder)
    with pytest.raises(ModelError, match="its tokenizer has 101 word pieces but the model reads 99"):
        load_family(folder, ("0", "1"))
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "table_dtype": "int4"}))
    with pytest.raises(ModelError, match="config.json: not a classic-model config .*table_dtype 'int4'"):
        load_family(folder, ("0", "1"))


@pytest.mark.parametrize(("family", "message"), [
    ({"arch": "static", "static": {"table_dtype": "int4"}},
     r"students\[0\]\.family\.static\.table_dtype: Input should be 'fp32', 'fp16' or 'int8'"),
    ({"arch": "static", "static": {"filters": [[3, 50]]}}, "family.static.filters is for arch static_cnn, not static"),
    ({"arch": "static_cnn", "static": {"weighting": "zipf"}},
     "family.static.weighting is for arch static / static_sentence, not"),
    ({"arch": "bilstm", "static": {"dims": 64}},
     "family.static is for arch static / static_cnn / static_bilstm / static_sentence, not bilstm"),
    ({"arch": "static_cnn", "static": {"filters": [[0, 8]]}}, r"family.static.filters: \[width, channels\]"),
    ({"arch": "static", "hidden": 64}, r"family.hidden is the classifier LSTM's; .*family.static.hidden"),
    ({"arch": "static_cnn", "pooling": "attention"}, "family.pooling is the classifier LSTM's"),
    ({"arch": "static", "static": {"dim": 64}},
     r"unknown key 'students\[0\]\.family\.static\.dim'; did you mean 'dims'"),
])
def test_bad_static_options_are_refused_naming_the_key(tmp_path: Path, family: dict, message: str) -> None:
    recipe = tiny_recipe(tmp_path, tmp_path, tmp_path, students=[{"name": "s", "family": family}])
    with pytest.raises(RecipeError, match=message):
        load_recipe(write_recipe(tmp_path / "r.yaml", recipe))


def test_resolved_recipes_write_static_options_for_static_students_only(tmp_path: Path) -> None:
    import yaml

    from tinyplm.config.load import dump_resolved

    students = [{"name": "bag", "family": {"arch": "static", "static": {"dims": 16, "table_dtype": "fp16"}}},
                {"name": "lstm", "family": {"arch": "bilstm"}}]
    cfg = load_recipe(write_recipe(tmp_path / "r.yaml", tiny_recipe(tmp_path, tmp_path, tmp_path, students=students)))
    resolved = dump_resolved(cfg)
    families = [s["family"] for s in yaml.safe_load(resolved)["students"]]
    assert families[0]["static"]["table_dtype"] == "fp16" and "static" not in families[1]
    (tmp_path / "resolved.yaml").write_text(resolved, encoding="utf-8")
    assert load_recipe(tmp_path / "resolved.yaml") == cfg  # loads back as it was


def test_openvino_compresses_the_bags_table_and_leaves_its_piece_weights(teacher, tmp_path):
    from tinyplm.compress.openvino import _compress_embeddings, _gathers_from_a_table
    from tinyplm.models.openvino import OvClassifier, to_openvino

    model, _ = _student(teacher, "static", weighting="sif")
    graph = to_openvino(model, tmp_path / "ov")
    gathers = [op for op in graph.get_ops() if op.get_type_name() == "Gather"]
    tables = [op for op in gathers if _gathers_from_a_table(op)]
    assert len(gathers) == 3  # row_of (int ids), token_weights (a vector), the table
    assert [list(op.input_value(0).get_node().get_output_partial_shape(0).to_shape()) for op in tables] == \
        [[model.config.table_rows, 8]]
    compressed = OvClassifier(_compress_embeddings(graph), model.config, "f32", "int8 embeddings")
    _, tok = teacher
    batch = _batch(tok)
    torch.testing.assert_close(torch.as_tensor(compressed(**batch).logits), model(**batch).logits, atol=0.05, rtol=0)


# -- the embedding task's static student (family.arch: static_sentence) -------------------------------


@pytest.fixture(scope="module")
def sentence_teacher(tmp_path_factory):
    """A tiny sentence-transformers model (random BERT, mean pooling, normalised) loaded by tinyplm."""
    from helpers_embedding import make_sentence_dir
    from tinyplm.models.embedder import load_embedder

    return load_embedder(make_sentence_dir(tmp_path_factory.mktemp("st") / "teacher"))


def test_a_pieces_vector_is_the_teachers_vector_of_the_piece_alone_before_normalising(sentence_teacher):
    """As Model2Vec's: the teacher's pooled output of ``[CLS] piece [SEP]``, its length kept (it weighs
    the piece in a text's mean); normalised, it is the teacher's sentence vector of the piece."""
    from tinyplm.models.classic.static_init import sentence_piece_vectors

    tok = sentence_teacher.tokenizer
    ids = [5, 17, 40]
    got = sentence_piece_vectors(sentence_teacher.model, tok, ids, batch_size=2)  # two batches
    want = sentence_teacher.embed([tok.convert_ids_to_tokens(i) for i in ids])
    assert got.shape == (3, sentence_teacher.dim) and got.dtype == np.float32
    norms = np.linalg.norm(got, axis=1, keepdims=True)
    assert not np.allclose(norms, 1.0, atol=1e-3)
    np.testing.assert_allclose(got / norms, want, atol=1e-5)
    assert not sentence_teacher.model.training


def test_zipf_ranks_leave_placeholder_pieces_out() -> None:
    """Model2Vec ranks pieces by vocabulary order after dropping BERT's ``[unused..]`` placeholders:
    a piece after 1,000 placeholders weighs as it would at their place, and the placeholders 0."""
    from tinyplm.models.classic.static_init import piece_weights

    counts = np.zeros(1200, np.int64)
    kept = list(range(1200))
    placeholders = list(range(100, 1100))
    with_gap = piece_weights("zipf", kept, counts, set(), 1e-4, placeholders)
    without = piece_weights("zipf", list(range(200)), np.zeros(200, np.int64), set(), 1e-4)
    np.testing.assert_allclose(with_gap[1100:], without[100:], rtol=1e-6)  # the same 200 ranked pieces
    np.testing.assert_allclose(with_gap[:100], without[:100], rtol=1e-6)
    assert np.all(with_gap[placeholders] == 0) and with_gap[1100] < with_gap[1199]


def test_a_static_sentence_student_saved_by_save_model_loads_for_the_embedding_head(sentence_teacher, tmp_path):
    from tinyplm.models.classic.static_init import sentence_piece_vectors
    from tinyplm.models.classic.static_sentence import StaticSentenceEncoder, encode_static, static_sentence_student
    from tinyplm.models.head_loading import load_for_head
    from tinyplm.tasks.heads import Head

    tok = sentence_teacher.tokenizer
    model = static_sentence_student(lambda ids: sentence_piece_vectors(sentence_teacher.model, tok, ids), tok, 8,
                                    "zipf", range(len(tok)), None, True, table_dtype="fp16")
    assert model.dim == 8
    save_model(model, tok, tmp_path / "s")  # the model's own layout (save_to)
    loaded, loaded_tok = load_for_head(tmp_path / "s", (), False, Head.EMBEDDING)
    assert isinstance(loaded, StaticSentenceEncoder) and loaded.config.table_dtype == "fp16"
    np.testing.assert_allclose(encode_static(loaded, loaded_tok, TEXTS), encode_static(model, tok, TEXTS), atol=1e-6)


def test_a_sentence_student_keeps_every_piece_and_zipf_unless_the_recipe_says_otherwise():
    from tinyplm.config.classic import FamilySpec

    plain = FamilySpec.model_validate({"arch": "static_sentence", "static": {"dims": 8}}).static
    assert (plain.tokens, plain.weighting) == ("all", "zipf")
    asked = FamilySpec.model_validate({"arch": "static_sentence", "static": {"tokens": "used", "weighting": "sif"}})
    assert (asked.static.tokens, asked.static.weighting) == ("used", "sif")
    assert FamilySpec.model_validate({"arch": "static"}).static.tokens == "used"  # the classifiers' default stays
