"""Per-layer shapes (pruned heads and FFN neurons) travel with the saved model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertConfig, BertForSequenceClassification

from conftest import make_tiny_model_dir
from tinyplm.errors import ModelError
from tinyplm.models import load_classifier, save_model
from tinyplm.models.shape import (
    SHAPE_KEY,
    build_shaped,
    hf_representable,
    keep_heads,
    keep_neurons,
    layer_shape,
    params_from_config,
)

IDS = torch.tensor([[2, 10, 11, 12, 13, 3, 0, 0], [2, 20, 21, 3, 0, 0, 0, 0]])
MASK = (IDS != 0).long()


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(input_ids=IDS, attention_mask=MASK).logits


def _tiny(tmp_path: Path):
    path = make_tiny_model_dir(tmp_path / "tiny")
    model, tok = load_classifier(path, ("negative", "positive"), False)
    return model, tok


def test_keep_heads_equals_zeroing_the_removed_heads(tmp_path: Path) -> None:
    model, _ = _tiny(tmp_path)
    size = 32 // 4
    reference = BertForSequenceClassification(model.config)
    reference.load_state_dict(model.state_dict())
    with torch.no_grad():  # zero heads 1 and 3 of layer 0 in the attention output's input columns
        w = reference.bert.encoder.layer[0].attention.output.dense.weight
        w[:, size:2 * size] = 0
        w[:, 3 * size:] = 0
    keep_heads(model.bert.encoder.layer[0], [0, 2], size)
    assert layer_shape(model)["heads"] == [2, 4]
    assert torch.allclose(_logits(model), _logits(reference), atol=1e-5)


def test_keep_neurons_equals_zeroing_the_removed_neurons(tmp_path: Path) -> None:
    model, _ = _tiny(tmp_path)
    reference = BertForSequenceClassification(model.config)
    reference.load_state_dict(model.state_dict())
    keep = list(range(0, 37, 2))
    with torch.no_grad():
        drop = [i for i in range(37) if i not in keep]
        reference.bert.encoder.layer[1].output.dense.weight[:, drop] = 0
    keep_neurons(model.bert.encoder.layer[1], keep)
    assert layer_shape(model)["ffn"] == [37, len(keep)]
    assert torch.allclose(_logits(model), _logits(reference), atol=1e-5)


def test_pruned_model_saves_and_reloads_without_replay(tmp_path: Path) -> None:
    model, tok = _tiny(tmp_path)
    size = 8
    keep_heads(model.bert.encoder.layer[0], [1, 2, 3], size)
    keep_heads(model.bert.encoder.layer[1], [0], size)
    keep_neurons(model.bert.encoder.layer[0], range(10))
    before = _logits(model)
    assert not hf_representable(model)
    out = save_model(model, tok, tmp_path / "pruned")
    config = json.loads((out / "config.json").read_text())
    assert config[SHAPE_KEY] == {"heads": [3, 1], "ffn": [10, 37]}
    loaded, _ = load_classifier(out, ("negative", "positive"), False)
    assert torch.equal(_logits(loaded), before)
    assert sum(p.numel() for p in loaded.parameters()) == params_from_config(loaded.config)
    # the pruned attention really is smaller
    assert loaded.bert.encoder.layer[1].attention.self.query.weight.shape == (8, 32)


def test_uniform_ffn_is_plain_hugging_face(tmp_path: Path) -> None:
    model, tok = _tiny(tmp_path)
    for layer in model.bert.encoder.layer:
        keep_neurons(layer, range(5, 25))
    assert hf_representable(model)
    out = save_model(model, tok, tmp_path / "ffn20")
    config = json.loads((out / "config.json").read_text())
    assert SHAPE_KEY not in config and config["intermediate_size"] == 20
    hf = AutoModelForSequenceClassification.from_pretrained(out)
    assert torch.equal(_logits(hf), _logits(model))


def test_params_from_config_matches_unpruned_models() -> None:
    for cfg in (BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=37, max_position_embeddings=64, num_labels=3),
                BertConfig(vocab_size=50, hidden_size=24, num_hidden_layers=3, num_attention_heads=2,
                           intermediate_size=10, max_position_embeddings=16)):
        model = build_shaped(cfg, BertForSequenceClassification)
        assert sum(p.numel() for p in model.parameters()) == params_from_config(cfg)


def test_bad_shapes_are_refused(tmp_path: Path) -> None:
    model, tok = _tiny(tmp_path)
    layer = model.bert.encoder.layer[0]
    with pytest.raises(ModelError, match="every attention head"):
        keep_heads(layer, [], 8)
    with pytest.raises(ModelError, match="out of range"):
        keep_heads(layer, [0, 4], 8)
    with pytest.raises(ModelError, match="every FFN neuron"):
        keep_neurons(layer, [])
    keep_heads(layer, [0], 8)
    out = save_model(model, tok, tmp_path / "p")
    config = json.loads((out / "config.json").read_text())
    config[SHAPE_KEY]["heads"] = [1, 4, 4]
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="lists 3 layers"):
        load_classifier(out, ("negative", "positive"), False)


def test_a_fresh_pruned_classifier_keeps_its_head_after_saving(tmp_path: Path) -> None:
    _, tok = _tiny(tmp_path)
    cfg = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                     max_position_embeddings=64)
    model = BertForSequenceClassification(cfg)  # never saved by Hugging Face: no architectures yet
    keep_heads(model.bert.encoder.layer[0], [0], 8)
    loaded, _ = load_classifier(save_model(model, tok, tmp_path / "fresh"), ("negative", "positive"), False)
    assert torch.equal(_logits(loaded), _logits(model))
