"""The Head table: each head knows its transformers class suffix and whether logits are per position."""

from __future__ import annotations

import pytest
from transformers import (
    BertConfig,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)

from tinyplm.models.student import HEAD_CLASSES, head_of
from tinyplm.tasks.heads import Head


def test_heads_are_the_recipe_names() -> None:
    assert [h.value for h in Head] == ["sequence", "span", "token", "embedding"]
    assert Head("span") is Head.SPAN and Head.SPAN == "span"  # results.json and recipes keep plain names
    with pytest.raises(ValueError):
        Head("regression")


@pytest.mark.parametrize("cls, head", [(BertForSequenceClassification, Head.SEQUENCE),
                                       (BertForQuestionAnswering, Head.SPAN),
                                       (BertForTokenClassification, Head.TOKEN)])
def test_each_model_class_carries_its_head(cls, head: Head) -> None:
    cfg = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37)
    model = cls(cfg)
    assert head_of(model) is head and HEAD_CLASSES[head] is cls
    assert type(model).__name__.endswith(head.auto_suffix)
    assert head.per_position is (head is not Head.SEQUENCE)
    assert Head.of_architectures([f"Roberta{head.auto_suffix}"]) is head  # other families name it the same way
