"""Layer-wise features of RoBERTa and DeBERTa models: attention recomputed from the captured Q and K
(DeBERTa's with its relative-position terms) equals what the model itself softmaxes, and hidden-state
and attention KD train a student of another family against a BERT or DeBERTa teacher."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DebertaV2Config,
    DebertaV2ForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)

from tinyplm.config.schema import ObjectiveSpec, ShapeSpec, StudentSpec
from tinyplm.distill.objective import build_objective
from tinyplm.models.features import forward_features
from tinyplm.models.student import DEBERTA_ATTENTION, build_student

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, type_vocab_size=2)


def deberta(**over):
    torch.manual_seed(0)
    cfg = DebertaV2Config(**TINY, **{**DEBERTA_ATTENTION, "position_buckets": 8, **over})
    return DebertaV2ForSequenceClassification(cfg).eval()


def roberta():
    torch.manual_seed(0)
    cfg = RobertaConfig(**{**TINY, "max_position_embeddings": 66}, attn_implementation="eager")
    return RobertaForSequenceClassification(cfg).eval()


def inputs() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[2, 10, 11, 12, 13, 14, 15, 3], [2, 20, 21, 22, 3, 0, 0, 0]])
    return {"input_ids": ids, "attention_mask": (ids != 0).long()}


@pytest.mark.parametrize("make", [
    roberta, deberta, lambda: deberta(share_att_key=False), lambda: deberta(pos_att_type=["c2p"]),
])
def test_attention_probs_equal_the_models_own(make):
    model = make()
    batch = inputs()
    feats = forward_features(model, batch, ["attn_probs", "attn_scores", "hidden", "embeddings"])
    with torch.no_grad():
        own = model(**batch, output_attentions=True).attentions  # eager attention: it returns them
    assert len(feats.attn_probs) == len(own) == 2
    real = batch["attention_mask"].bool()
    for mine, theirs in zip(feats.attn_probs, own, strict=True):
        assert mine.shape == theirs.shape == (2, 4, 8, 8)
        for b in range(2):  # rows of real query tokens (DeBERTa masks padded query rows whole)
            n = int(real[b].sum())
            assert torch.allclose(mine[b, :, :n], theirs[b, :, :n], atol=1e-5)
    assert len(feats.hidden) == 2 and feats.embeddings.shape == (2, 8, 32)


def test_relative_terms_matter():
    """Without the relative-position terms the probabilities would differ: the test above is not
    passed by content scores alone."""
    from tinyplm.models.features import attention_from_qk

    model = deberta()
    feats = forward_features(model, inputs(), ["attn_probs", "queries", "keys"])
    plain = attention_from_qk(feats.queries[0], feats.keys[0], 4, inputs()["attention_mask"])[1]
    assert not torch.allclose(plain, feats.attn_probs[0], atol=1e-3)


@pytest.mark.parametrize("arch, teacher", [("deberta", "bert"), ("roberta", "bert"), ("deberta", "deberta")])
def test_hidden_and_attention_kd_train_a_student_of_another_family(arch, teacher):
    torch.manual_seed(0)
    t = BertForSequenceClassification(BertConfig(**TINY)).eval() if teacher == "bert" else deberta()
    student = build_student(StudentSpec(shape=ShapeSpec(layers=2, hidden=16, heads=4, ffn=24)), t, arch=arch)
    spec = ObjectiveSpec(kd_weight=1.0, hard_weight=0.5, temperature=2.0, hidden=1.0, attention_kl=1.0,
                         layer_map="uniform")
    objective = build_objective(spec, student.config, t.config, is_regression=False)
    batch = inputs()
    with torch.no_grad():
        t_feats = forward_features(t, batch, objective.wants)
    s_feats = forward_features(student, batch, objective.wants)
    loss, parts = objective.terms(s_feats, t_feats, torch.tensor([0, 1]), t_feats.logits)
    loss.backward()
    assert {"hidden", "attention_kl"} <= set(parts) and torch.isfinite(loss)
    assert objective.hidden_proj.weight.grad is not None  # widths 16 -> 32 through the projection
    if arch == "deberta":  # the relative-position table learns through the attention term
        assert student.deberta.encoder.rel_embeddings.weight.grad.abs().sum() > 0
