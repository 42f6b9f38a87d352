"""Taylor importance, unit selection and structured pruning that physically shrinks the model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import make_tiny_model_dir
from tinyplm.compress.importance import Importance, importance, select
from tinyplm.compress.structured import drop_layers, least_important_layers, prune_ffn, prune_heads
from tinyplm.errors import ModelError
from tinyplm.models import load_classifier
from tinyplm.models.shape import layer_shape
from tinyplm.tasks.base import Example, Split
from tinyplm.tasks.encoding import collate, encode_split, model_inputs

LABELS = ("negative", "positive")


@pytest.fixture()
def tiny(tmp_path: Path):
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), LABELS, False)
    rows = [Example(f"good movie {i}" if i % 2 else f"bad film {i}", None, i % 2, i) for i in range(64)]
    enc = encode_split(Split("train", rows, tmp_path), tok, 16)
    return model, enc


def test_importance_is_the_gradient_of_a_gate(tiny) -> None:
    model, enc = tiny
    scores = importance(model, enc, batches=2, batch_size=16)
    assert [len(s) for s in scores.heads] == [4, 4] and [len(s) for s in scores.ffn] == [37, 37]
    assert all((s >= 0).all() and s.sum() > 0 for s in scores.heads + scores.ffn)
    assert all(p.grad is None for p in model.parameters())  # weights untouched, no grads left
    again = importance(model, enc, batches=2, batch_size=16)
    assert torch.allclose(torch.cat(again.heads), torch.cat(scores.heads))  # deterministic


def test_importance_matches_a_finite_difference(tiny) -> None:
    model, enc = tiny
    one = importance(model, enc, batches=1, batch_size=16, seed=3)
    idx = torch.randperm(len(enc), generator=torch.Generator().manual_seed(3))[:16].tolist()
    batch = collate(enc, idx)

    def loss() -> float:
        with torch.no_grad():
            logits = model(**model_inputs(batch)).logits
            return float(torch.nn.functional.cross_entropy(logits.double(), batch["labels"]))

    eps, (layer, head) = 1e-3, (1, 2)
    base = loss()
    dense = model.bert.encoder.layer[layer].attention.output.dense
    with torch.no_grad():  # gate of head 2 set to 1 - eps
        dense.weight[:, head * 8:(head + 1) * 8] *= 1 - eps
    slope = (base - loss()) / eps
    assert abs(slope) == pytest.approx(float(one.heads[layer][head]), rel=0.05, abs=1e-5)


def test_select_global_and_per_layer() -> None:
    scores = [torch.tensor([0.9, 0.1, 0.8, 0.2]), torch.tensor([0.05, 0.01, 0.02, 0.03])]
    assert select(scores, 0.5, "layer") == [[0, 2], [0, 3]]
    assert select(scores, 0.5, "global") == [[0, 2, 3], [0]]  # layer 1 keeps its best one
    assert select(scores, 1.0, "global") == [[0, 1, 2, 3], [0, 1, 2, 3]]
    with pytest.raises(ValueError, match="keep"):
        select(scores, 0.0)
    with pytest.raises(ValueError, match="scope"):
        select(scores, 0.5, "model")


def test_prune_heads_and_ffn_keep_the_most_important(tiny) -> None:
    model, enc = tiny
    scores = importance(model, enc, batches=2, batch_size=16)
    info = prune_heads(model, scores, 0.5, "layer")
    assert info["heads_after"] == [2, 2] and layer_shape(model)["heads"] == [2, 2]
    for kept, s in zip(info["kept"], scores.heads, strict=True):
        assert set(kept) == set(s.argsort(descending=True)[:2].tolist())
    info = prune_ffn(model, scores, 0.5, "layer")
    assert info["ffn_after"] == [18, 18]  # round(0.5 * 37)
    batch = collate(enc, list(range(8)))
    assert model(**model_inputs(batch)).logits.shape == (8, 2)


def test_drop_layers(tiny) -> None:
    model, enc = tiny
    scores = Importance([torch.ones(4), torch.zeros(4)], [torch.ones(37), torch.zeros(37)])
    assert least_important_layers(scores, 1) == [1]
    info = drop_layers(model, [1])
    assert info == {"dropped": [1], "layers_after": 1} and model.config.num_hidden_layers == 1
    assert model(**model_inputs(collate(enc, [0, 1]))).logits.shape == (2, 2)
    with pytest.raises(ModelError, match="out of range"):
        drop_layers(model, [3])
    with pytest.raises(ModelError, match="cannot drop all"):
        drop_layers(model, [0])
