"""The model contract on every encoder family of the role table (tiny random models from config
classes, tiny tokenizers of each family's kind: WordPiece, byte-level BPE, Unigram; nothing is
downloaded). For each compress step a family takes: the saved directory reloads with identical
logits, its parameter count is the one its config describes, the units the step removes are gone
in the numbers its settings promise, and exported models agree with their PyTorch parent. A step a
family cannot take raises a ``ModelError`` that says why."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from pydantic import TypeAdapter

from helpers_families import FAMILIES, FFN, HEADS, LAYERS, make_family_dir
from tinyplm.compress import CompressContext, apply_step
from tinyplm.config.compress import CompressStep
from tinyplm.errors import ModelError
from tinyplm.evaluate.size import count_params
from tinyplm.models import load_classifier, roles, save_model
from tinyplm.models.factorized import FactorizedEmbedding, LowRankLinear
from tinyplm.models.onnx import OrtClassifier, export_onnx
from tinyplm.models.shape import layer_shape, params_from_config
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split, model_inputs

LABELS = ("negative", "positive")
STEPS = {
    "prune_heads": {"keep": 0.5, "score_batches": 2},
    "prune_ffn": {"keep": 0.5, "score_batches": 2, "scope": "global"},
    "drop_layers": {"count": 1, "score_batches": 2},
    "share": {"mode": "all"},
    "svd": {"ratio": 0.25},
    "factorize_embeddings": {"rank": 8},
    "trim_vocab": {},
    "onnx_dynamic_int8": {},
    "onnx_static_int8": {"calibration_examples": 16},
    "openvino_int8": {"calibration_examples": 16, "precision": "f32"},
}
EXPORTS = ("onnx_dynamic_int8", "onnx_static_int8", "openvino_int8")
#: (family, step) -> what the error says: the steps a family cannot take.
REFUSED = {("mpnet", "prune_heads"): "relative-position bias is one table shared by every layer"}
CASES = [(f, k) for f in FAMILIES for k in STEPS if (f, k) not in REFUSED]


@dataclass
class Run:
    before: int  # parameters of the model the step started from (ALBERT: its layers made independent)
    reference: torch.Tensor  # that model's logits on 8 examples
    out: object
    info: dict
    loaded: object
    batch: dict
    enc: object


def _model(family: str, tmp: Path):
    model, tok = load_classifier(make_family_dir(tmp / "m", family), LABELS, False)
    rows = [Example(f"good movie {i} fun" if i % 2 else f"bad dull film {i}", None, i % 2, i) for i in range(64)]
    return model, tok, rows


def _apply(family: str, kind: str, tmp: Path) -> Run:
    model, tok, rows = _model(family, tmp)
    if kind not in EXPORTS:
        roles.layers(model)  # a stage that changes layers makes ALBERT's shared group independent first
    enc = encode_split(Split("train", rows, tmp), tok, 16)
    reference = model(**model_inputs(collate(enc, list(range(8))))).logits.detach()
    before = count_params(model)[0]
    ctx = CompressContext(enc, None, False, tmp / "work", tokenizer=tok, evals={"dev": enc},
                          texts=[(r.text, None) for r in rows],
                          reencode=lambda t: (encode_split(Split("train", rows, tmp), t, 16),
                                              {"dev": encode_split(Split("dev", rows, tmp), t, 16)}))
    step = TypeAdapter(CompressStep).validate_python({"kind": kind, **STEPS[kind]})
    out, info = apply_step(model, step, ctx)
    enc, tok = ctx.train, ctx.tokenizer  # a trimmed vocabulary brings its own ids
    loaded, _ = load_classifier(save_model(out, tok, tmp / "saved"), LABELS, False)
    return Run(before, reference, out, info, loaded, model_inputs(collate(enc, list(range(8)))), enc)


def _linear_params(model) -> int:
    return sum(p.numel() for m in model.modules() if isinstance(m, LowRankLinear | torch.nn.Linear)
               for p in m.parameters(recurse=False))


def assert_shrunk(family: str, kind: str, run: Run) -> None:
    """The saved and loaded model has what the step's settings promise, counted off its modules."""
    model, before, after = run.loaded, run.before, count_params(run.loaded)[0]
    if kind in EXPORTS:
        assert after == before
    elif kind == "prune_heads":
        heads = layer_shape(model)["heads"]
        assert sum(heads) == round(STEPS[kind]["keep"] * LAYERS * HEADS) and min(heads) >= 1 and after < before
    elif kind == "prune_ffn":
        assert sum(layer_shape(model)["ffn"]) == round(STEPS[kind]["keep"] * LAYERS * FFN) and after < before
    elif kind == "drop_layers":
        assert len(roles.layers(model)) == model.config.num_hidden_layers == LAYERS - 1 and after < before
        if family == "modernbert":  # each kept layer keeps its attention type; layer 0 is always kept
            dropped = run.info["dropped"][0]
            assert dropped != 0
            assert model.config.layer_types == [t for i, t in enumerate(("full_attention", "sliding_attention",
                                                                         "full_attention")) if i != dropped]
    elif kind == "share":
        assert len({roles.layer_linear(x, "ffn_out").weight.data_ptr() for x in roles.layers(model)}) == 1
        assert after < before
    elif kind == "svd":
        assert any(isinstance(m, LowRankLinear) for m in model.modules()) and after < before
    elif kind == "factorize_embeddings":
        words = roles.word_embeddings(model)
        assert isinstance(words, FactorizedEmbedding) and words.rank == 8 and after < before
    elif kind == "trim_vocab":
        assert model.config.vocab_size == roles.word_embeddings(model).num_embeddings < run.info["vocab_before"]
        assert after < before


@pytest.mark.parametrize(("family", "kind"), CASES)
def test_contract(family: str, kind: str, tmp_path: Path) -> None:
    run = _apply(family, kind, tmp_path)
    with torch.no_grad():
        logits = run.out.eval()(**run.batch).logits
        assert logits.shape == (8, 2)
        assert torch.equal(run.loaded.eval()(**run.batch).logits, logits)  # save -> load: identical logits
    assert count_params(run.loaded)[0] == params_from_config(run.loaded.config)  # the config says the size
    assert_shrunk(family, kind, run)
    if kind in EXPORTS:  # an exported int8 model agrees with its PyTorch parent
        torch.testing.assert_close(logits.float(), run.reference, atol=0.05, rtol=0)
        return
    if kind == "trim_vocab":  # the same pieces under new ids: the same outputs
        torch.testing.assert_close(logits, run.reference, atol=1e-5, rtol=0)
    onnx = OrtClassifier(export_onnx(run.loaded, tmp_path / "export.onnx"), run.loaded.config)
    longer = model_inputs(collate(run.enc, list(range(16, 40))))  # another batch size and length
    with torch.no_grad():
        torch.testing.assert_close(onnx(**longer).logits, run.loaded(**longer).logits, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(("family", "kind"), sorted(REFUSED))
def test_a_step_a_family_cannot_take_says_why(family: str, kind: str, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=REFUSED[family, kind]):
        _apply(family, kind, tmp_path)


def test_modernbert_keeps_its_first_layer(tmp_path: Path) -> None:
    from tinyplm.compress.structured import drop_layers

    model, _, _ = _model("modernbert", tmp_path)
    with pytest.raises(ModelError, match="first layer has no attention LayerNorm"):
        drop_layers(model, [0])


def test_albert_expands_its_shared_group_and_says_so(tmp_path: Path, caplog) -> None:
    model, tok, rows = _model("albert", tmp_path)
    batch = model_inputs(collate(encode_split(Split("train", rows, tmp_path), tok, 16), list(range(8))))
    with torch.no_grad():
        shared = model(**batch).logits
    assert roles.grouped(model) and model.config.num_hidden_groups == 1
    with caplog.at_level(logging.INFO, logger="tinyplm.models.roles"):
        assert len(roles.layers(model)) == LAYERS
    assert "expanded into 3 independent layers" in caplog.text and model.config.num_hidden_groups == LAYERS
    assert not roles.grouped(model) and len({id(x) for x in roles.layers(model)}) == LAYERS
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, shared, atol=1e-6, rtol=0)  # the same function
    saved = save_model(model, tok, tmp_path / "saved")
    assert load_classifier(saved, LABELS, False)[0].config.num_hidden_groups == LAYERS  # a plain HF ALBERT


def test_albert_expanded_under_inference_mode_still_trains(tmp_path: Path) -> None:
    """``tinyplm heads`` reads the layers inside its inference-mode statistics pass, then scores
    heads with gradients: the copied groups were inference tensors, and the scoring a traceback."""
    model, tok, rows = _model("albert", tmp_path)
    with torch.inference_mode():
        roles.layers(model)
    assert not any(p.is_inference() for p in model.parameters())
    batch = model_inputs(collate(encode_split(Split("train", rows, tmp_path), tok, 16), list(range(8))))
    model(**batch).logits.sum().backward()  # raised "Inference tensors cannot be saved for backward"


def test_a_saved_shared_albert_stays_shared(tmp_path: Path) -> None:
    model, tok, _ = _model("albert", tmp_path)
    loaded, _ = load_classifier(save_model(model, tok, tmp_path / "saved"), LABELS, False)
    assert loaded.config.num_hidden_groups == 1 and count_params(loaded)[0] == count_params(model)[0]


def test_an_albert_with_factorized_embeddings_reloads_with_its_shared_group(tmp_path: Path) -> None:
    """factorize_embeddings leaves ALBERT's layer group shared (stored once); loading the saved
    model expanded the group first and then missed the weights of the copies."""
    from tinyplm.models.factorized import factorize_embeddings

    model, tok, rows = _model("albert", tmp_path)
    factorize_embeddings(model, 4)
    loaded, _ = load_classifier(save_model(model, tok, tmp_path / "saved"), LABELS, False)
    assert loaded.config.num_hidden_groups == 1 and count_params(loaded)[0] == count_params(model)[0]
    batch = model_inputs(collate(encode_split(Split("train", rows, tmp_path), tok, 16), list(range(8))))
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, model.eval()(**batch).logits)
