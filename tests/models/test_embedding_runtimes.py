"""An embedding model (SentenceEncoder) in its runtime forms: the ONNX and OpenVINO graphs hold the
pooling over the attention mask, the Dense layers and the normalisation, so each answers
``predict_logits`` with the PyTorch model's vectors at any batch and length (padding included);
every form saves as a self-describing dir that load_embedder and load_for_head read back to the
same vectors; a pruned child exports as its parent does."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizerFast

from conftest import WORDS, tiny_vocab
from helpers_families import tiny_config, tiny_tokenizer
from tinyplm.compress.importance import Importance
from tinyplm.compress.onnx_quant import dynamic_int8, onnx_fp32, static_int8
from tinyplm.compress.openvino import openvino_float, openvino_int8
from tinyplm.compress.structured import prune_ffn, prune_heads
from tinyplm.compress.vocab import trim_vocab
from tinyplm.errors import ModelError
from tinyplm.models.embedder import load_embedder
from tinyplm.models.head_loading import load_for_head
from tinyplm.models.infer import predict_logits
from tinyplm.models.io import is_complete, save_model
from tinyplm.models.onnx import FORMAT_KEY, PARAMS_KEY, SENTENCE_OUTPUT, OrtEmbedder, ort_session
from tinyplm.models.openvino import OvEmbedder
from tinyplm.models.pooling import TANH, DenseSpec, Pooling, PoolMode, SentenceLayout, read_layout
from tinyplm.models.sentence import SentenceEncoder, encode_texts, save_sentence_encoder
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import Encoded, encode_split
from tinyplm.tasks.heads import Head


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _tokenizer() -> BertTokenizerFast:
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(tiny_vocab())}, do_lower_case=True)


def _model(mode: PoolMode = PoolMode.MEAN, dense: bool = False, normalize: bool = True, seed: int = 0):
    """A tiny random BERT (vocab 99, hidden 32, 2 layers, 4 heads, FFN 37) pooled by ``mode``."""
    torch.manual_seed(seed)
    encoder = BertModel(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=37, max_position_embeddings=64))
    specs = (DenseSpec(32, 16, True, TANH),) if dense else ()
    layout = SentenceLayout(Pooling(mode, dimension=32), dense=specs, normalize=normalize, max_seq_length=48)
    return SentenceEncoder(encoder, layout).eval()


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 40))) for _ in range(n)]


def _encoded(texts: list[str]) -> Encoded:
    split = Split("texts", [Example(t, None, None) for t in texts], Path("texts"), Head.EMBEDDING)
    return encode_split(split, _tokenizer(), 48)


def _work(tmp_path: Path) -> Path:
    """A step's scratch folder (the run makes it before a step)."""
    (tmp_path / "work").mkdir(exist_ok=True)
    return tmp_path / "work"


def _cosines(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=1).numpy()


@pytest.fixture(scope="module")
def enc() -> Encoded:
    """Texts of 1 to 40 words: batches padded to lengths beyond the 16 positions the export traces."""
    return _encoded(_texts(40, 0))


@pytest.mark.parametrize("mode", list(PoolMode))
def test_each_pooling_exports_with_its_mask_and_gives_the_pytorch_vectors(tmp_path, enc, mode) -> None:
    """Every pooling mode, over padded batches of mixed lengths, in the graph (normalised or not)."""
    model = _model(mode, normalize=mode is not PoolMode.MAX)
    graph = onnx_fp32(model, tmp_path)
    assert isinstance(graph, OrtEmbedder) and graph.dim == 32
    session = ort_session(graph.path)
    assert [o.name for o in session.get_outputs()] == [SENTENCE_OUTPUT]
    assert session.get_outputs()[0].shape[0] == "batch"
    want, got = predict_logits(model, enc, batch_size=7), predict_logits(graph, enc, batch_size=7)
    assert got.shape == (len(enc), 32)
    assert torch.allclose(got, want, atol=1e-5)
    alone = predict_logits(graph, enc.subset([3]), batch_size=1)  # no padding at all
    assert torch.allclose(alone[0], want[3], atol=1e-5)


def test_dense_layers_are_in_the_graph_and_in_the_saved_dir(tmp_path, enc) -> None:
    model = _model(dense=True)
    graph = onnx_fp32(model, _work(tmp_path))
    assert graph.dim == 16 and graph.num_parameters() == sum(p.numel() for p in model.parameters())
    assert torch.allclose(predict_logits(graph, enc), predict_logits(model, enc), atol=1e-5)
    out = save_model(graph, _tokenizer(), tmp_path / "onnx")
    assert (out / "2_Dense" / "model.safetensors").is_file() and read_layout(out) == graph.layout
    loaded, _ = load_for_head(out, (), False, Head.EMBEDDING)
    assert isinstance(loaded, OrtEmbedder) and loaded.dim == 16
    assert torch.allclose(predict_logits(loaded, enc), predict_logits(model, enc), atol=1e-5)
    assert torch.equal(loaded.sentence.dense[0]["linear.weight"], model.dense[0].linear.weight.detach())


#: Each runtime form of an embedding model, and the least cosine each text keeps with the PyTorch vectors.
FORMS = {
    "onnx_fp32": (lambda m, e, w: onnx_fp32(m, w), 0.99999),
    "onnx_dynamic_int8": (lambda m, e, w: dynamic_int8(m, w, embeddings=True), 0.95),
    "onnx_static_int8": (lambda m, e, w: static_int8(m, e, w, examples=16), 0.95),
    "openvino_f32": (lambda m, e, w: openvino_float(m, w, precision="f32"), 0.99999),
    "openvino_int8_weights": (lambda m, e, w: openvino_float(m, w, precision="f32", weights="int8"), 0.99),
    "openvino_int8": (lambda m, e, w: openvino_int8(m, e, w, examples=16, precision="f32"), 0.95),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_each_runtime_form_saves_and_loads_back_to_the_same_vectors(tmp_path, enc, form) -> None:
    make, least = FORMS[form]
    model, tok = _model(dense=True), _tokenizer()
    graph = make(model, enc, _work(tmp_path))
    assert isinstance(graph, OrtEmbedder | OvEmbedder)
    vectors = predict_logits(graph, enc)
    assert _cosines(vectors, predict_logits(model, enc)).min() >= least
    assert np.allclose(vectors.norm(dim=1).numpy(), 1.0, atol=1e-3)  # the normalisation is in the graph

    out = save_model(graph, tok, tmp_path / form)
    config = json.loads((out / "config.json").read_text())
    assert is_complete(out) and config[FORMAT_KEY] in ("onnx", "openvino")
    assert config[PARAMS_KEY][0] == sum(p.numel() for p in model.parameters())
    assert (out / "modules.json").is_file() and (out / "1_Pooling" / "config.json").is_file()
    assert read_layout(out) == graph.layout and (out / "tokenizer.json").is_file()
    assert FORMAT_KEY not in model.config.to_dict()  # the graph's keys stay off the PyTorch model's config

    loaded, loaded_tok = load_for_head(out, (), False, Head.EMBEDDING)  # through load_embedder
    assert type(loaded) is type(graph) and loaded.dim == 16
    assert torch.allclose(predict_logits(loaded, enc), vectors, atol=1e-5)
    assert loaded_tok("The MOVIE")["input_ids"] == tok("the movie")["input_ids"]  # lower-cases as saved
    texts = _texts(9, 5)  # in the same batches as before saving (a dynamic int8 graph's vectors depend on them)
    before = encode_texts(graph, tok, texts, batch_size=4)
    assert np.allclose(encode_texts(loaded, loaded_tok, texts, batch_size=4), before, atol=1e-5)


def test_the_embedder_of_a_graph_dir_matches_the_pytorch_dir(tmp_path) -> None:
    model, tok = _model(PoolMode.CLS, dense=True), _tokenizer()
    save_sentence_encoder(model, tok, tmp_path / "torch")
    save_model(onnx_fp32(model, _work(tmp_path)), tok, tmp_path / "onnx")
    texts = ["", "a"] + _texts(11, 2) + ["the movie " * 40]  # the last cut to the layout's 48 tokens
    torch_vectors = load_embedder(tmp_path / "torch", batch_size=3).embed(texts)
    graph_vectors = load_embedder(tmp_path / "onnx", batch_size=5).embed(texts)
    assert graph_vectors.shape == (len(texts), 16)
    assert np.allclose(graph_vectors, torch_vectors, atol=1e-5)
    assert np.allclose(graph_vectors, encode_texts(model, tok, texts), atol=1e-5)


def test_a_pruned_child_exports_to_its_own_shape(tmp_path, enc) -> None:
    model = _model()
    generator = torch.Generator().manual_seed(1)
    scores = Importance([torch.rand(4, generator=generator) for _ in range(2)],
                        [torch.rand(37, generator=generator) for _ in range(2)])
    prune_heads(model, scores, keep=0.5, scope="global")
    prune_ffn(model, scores, keep=0.5, scope="global")
    graph = openvino_float(model, _work(tmp_path), precision="f32")
    assert graph.num_parameters() == sum(p.numel() for p in model.parameters())
    assert torch.allclose(predict_logits(graph, enc), predict_logits(model, enc), atol=1e-5)
    loaded = load_embedder(save_model(graph, _tokenizer(), tmp_path / "ov")).model
    assert torch.allclose(predict_logits(loaded, enc), predict_logits(model, enc), atol=1e-5)


def test_a_graph_dir_missing_its_graph_or_of_an_unknown_form_is_refused_by_name(tmp_path) -> None:
    model, tok = _model(), _tokenizer()
    out = save_model(onnx_fp32(model, _work(tmp_path)), tok, tmp_path / "onnx")
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, FORMAT_KEY: "tflite"}))
    with pytest.raises(ModelError, match="tinyplm_format: 'tflite'; an embedding model's runtime form is one of "
                                         "onnx, openvino"):
        load_embedder(out)
    (out / "config.json").write_text(json.dumps({**config, FORMAT_KEY: "openvino"}))
    with pytest.raises(ModelError, match="holds no model.xml"):
        load_embedder(out)


def test_a_trimmed_child_saves_with_its_own_tokenizer_and_loads_back(tmp_path) -> None:
    model, tok = _model(dense=True), _tokenizer()
    texts = _texts(20, 7)
    split = Split("texts", [Example(t, None, None) for t in texts], Path("texts"), Head.EMBEDDING)
    trimmed = trim_vocab(model, tok, {"train": encode_split(split, tok, 48)}, [(t, None) for t in texts],
                         lambda t: {"train": encode_split(split, t, 48)})
    assert len(trimmed.tokenizer) < len(tok) and model.config.vocab_size == len(trimmed.tokenizer)
    graph = dynamic_int8(model, _work(tmp_path))
    out = save_model(graph, trimmed.tokenizer, tmp_path / "onnx")
    assert json.loads((out / "config.json").read_text())["vocab_size"] == len(trimmed.tokenizer)
    loaded, loaded_tok = load_for_head(out, (), False, Head.EMBEDDING)
    assert len(loaded_tok) == len(trimmed.tokenizer)
    enc = encode_split(split, loaded_tok, 48)
    assert enc.input_ids == trimmed.encodings["train"].input_ids
    assert _cosines(predict_logits(loaded, enc), predict_logits(model, enc)).min() >= 0.95


@pytest.mark.parametrize("family", ["mpnet", "distilbert"])
def test_an_encoder_without_token_types_exports_without_that_input(tmp_path, family) -> None:
    import transformers

    tok = tiny_tokenizer("bpe")
    torch.manual_seed(0)
    encoder = transformers.AutoModel.from_config(tiny_config(family, len(tok)))
    model = SentenceEncoder(encoder, SentenceLayout(Pooling(PoolMode.MEAN, dimension=32), normalize=True)).eval()
    graph = onnx_fp32(model, _work(tmp_path))
    assert "token_type_ids" not in {i.name for i in ort_session(graph.path).get_inputs()}
    split = Split("texts", [Example(t, None, None) for t in _texts(12, 8)], Path("texts"), Head.EMBEDDING)
    enc = encode_split(split, tok, 48)
    assert torch.allclose(predict_logits(graph, enc), predict_logits(model, enc), atol=1e-5)
