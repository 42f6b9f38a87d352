"""The role table: every role names the right module of a tiny BERT (task, masked-LM, pre-training
and bare models), setters change what the forward uses, and unknown families are refused by name."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
    GPT2Config,
    GPT2Model,
)

from tinyplm.errors import ModelError
from tinyplm.models import roles

#: Where each role lives in a transformers BertLayer, written out independently of the table.
EXPECTED = {
    "query": lambda x: x.attention.self.query, "key": lambda x: x.attention.self.key,
    "value": lambda x: x.attention.self.value, "attn_out": lambda x: x.attention.output.dense,
    "ffn_in": lambda x: x.intermediate.dense, "ffn_out": lambda x: x.output.dense,
}


def tiny(cls=BertForSequenceClassification) -> nn.Module:
    torch.manual_seed(0)
    return cls(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=37, max_position_embeddings=64)).eval()


def ids() -> torch.Tensor:
    return torch.tensor([[2, 10, 11, 12, 3], [2, 20, 21, 3, 0]])


@pytest.mark.parametrize("cls", [BertForSequenceClassification, BertForMaskedLM, BertModel])
def test_every_role_resolves_to_the_bert_module(cls) -> None:
    model = tiny(cls)
    bert = model if cls is BertModel else model.bert
    assert roles.base_model(model) is bert and roles.is_encoder(model)
    assert roles.embeddings(model) is bert.embeddings
    assert roles.word_embeddings(model) is bert.embeddings.word_embeddings
    assert roles.embedding_norm(model) is bert.embeddings.LayerNorm
    assert roles.layers(model) is bert.encoder.layer and len(roles.layers(model)) == 2
    modules = dict(model.named_modules())
    for i, layer in enumerate(bert.encoder.layer):
        assert roles.self_attention(layer) is layer.attention.self
        assert roles.layer_norm(layer, "attn_norm") is layer.attention.output.LayerNorm
        assert roles.layer_norm(layer, "ffn_norm") is layer.output.LayerNorm
        for part in ("attention", "intermediate", "output"):
            assert roles.layer_part(layer, part) is getattr(layer, part)
        for role, where in EXPECTED.items():
            assert roles.layer_linear(layer, role) is where(layer)
            assert modules[roles.linear_name(model, i, role)] is where(layer)  # the name named_modules uses
    prefix = "" if cls is BertModel else "bert."
    assert roles.linear_name(model, 1, "query") == prefix + "encoder.layer.1.attention.self.query"
    listed = roles.encoder_linears(model)
    assert [(i, role) for i, role, _ in listed] == [(i, role) for i in range(2) for role in roles.LINEAR_ROLES]
    assert all(m is EXPECTED[role](bert.encoder.layer[i]) for i, role, m in listed)


def test_heads_of_each_model_kind() -> None:
    clf, mlm, pre = tiny(), tiny(BertForMaskedLM), tiny(BertForPreTraining)
    assert roles.task_heads(clf) == {"classifier": clf.classifier} and roles.task_heads(mlm) == {}
    assert roles.pooler(clf) is clf.bert.pooler and roles.pooler(mlm) is None  # the MLM's encoder has no pooler
    assert roles.mlm_head(mlm) is mlm.cls and roles.mlm_predictions(mlm) is mlm.cls.predictions
    assert roles.mlm_predictions(pre) is pre.cls.predictions and roles.pair_head(pre) is pre.cls.seq_relationship
    with pytest.raises(ModelError, match="masked-LM head"):
        roles.mlm_head(clf)
    with pytest.raises(ModelError, match="sentence-pair head"):
        roles.pair_head(mlm)


def test_set_layer_linear_replaces_the_module_the_forward_uses() -> None:
    model = tiny()
    before = model(input_ids=ids()).logits
    layer = roles.layers(model)[0]
    new = nn.Linear(32, 32)
    calls = []
    new.register_forward_hook(lambda *_: calls.append(1))
    roles.set_layer_linear(layer, "ffn_out", nn.Linear(37, 32))
    roles.set_layer_linear(layer, "query", new)
    assert roles.layer_linear(layer, "query") is new and layer.attention.self.query is new
    after = model(input_ids=ids()).logits
    assert calls == [1] and not torch.allclose(before, after)


def test_setters_for_embeddings_layers_parts_and_base() -> None:
    model = tiny()
    table = nn.Embedding(99, 32)
    roles.set_word_embeddings(model, table)
    assert model.bert.embeddings.word_embeddings is table
    kept = [roles.layers(model)[1]]
    roles.set_layers(model, kept)
    assert list(model.bert.encoder.layer) == kept and kept[0].attention.self.layer_idx == 0
    assert model(input_ids=ids()).logits.shape == (2, 2)  # one layer still runs
    other = tiny()
    roles.set_layer_part(roles.layers(other)[1], "intermediate", roles.layers(other)[0].intermediate)
    assert other.bert.encoder.layer[1].intermediate is other.bert.encoder.layer[0].intermediate
    bare = tiny(BertModel)
    roles.set_base_model(model, bare)
    assert roles.base_model(model) is bare
    with pytest.raises(ModelError, match="bare encoder"):
        roles.set_base_model(bare, tiny(BertModel))


def test_names_without_a_model_and_paths() -> None:
    model = tiny()
    assert roles.role_path("ffn_in") == "intermediate.dense"
    assert roles.config_linear_name(model.config, 1, "attn_out") == roles.linear_name(model, 1, "attn_out")
    with pytest.raises(ModelError, match="out of range"):
        roles.linear_name(model, 2, "query")


def test_unknown_roles_and_families_are_refused_by_name() -> None:
    layer = roles.layers(tiny())[0]
    with pytest.raises(ModelError, match="unknown role 'gate'"):
        roles.layer_linear(layer, "gate")
    with pytest.raises(ModelError, match="unknown layer part 'ffn'"):
        roles.layer_part(layer, "ffn")
    gpt2 = GPT2Model(GPT2Config(vocab_size=99, n_embd=32, n_layer=1, n_head=4, n_positions=64))
    with pytest.raises(ModelError, match="model_type 'gpt2'.*supported model types: bert"):
        roles.layers(gpt2)
    with pytest.raises(ModelError, match="GPT2Block is not an encoder layer.*BertLayer"):
        roles.layer_linear(gpt2.h[0], "query")
    with pytest.raises(ModelError, match="without config.model_type"):
        roles.base_model(nn.Linear(2, 2))
    assert not roles.is_encoder(gpt2) and not roles.is_encoder(nn.Linear(2, 2)) and not roles.is_encoder(object())


@pytest.mark.parametrize(("model_type", "pad"), [("mpnet", 3), ("mpnet", 1), ("roberta", 3), ("roberta", 1)])
def test_usable_positions_are_what_the_model_reads(model_type: str, pad: int) -> None:
    """A window of ``usable_positions`` tokens runs through the family's transformers model and one
    more token does not: RoBERTa's positions start after its config's pad_token_id, MPNet's after
    the padding id its code fixes at 1 whatever the config says."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model(model_type, vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=20, max_position_embeddings=24,
                                  pad_token_id=pad)
    usable = roles.usable_positions(config.to_dict())
    model = AutoModel.from_config(config).eval()
    ids = torch.full((1, usable + 1), 5)
    with torch.no_grad():
        model(input_ids=ids[:, :usable])
        with pytest.raises((IndexError, RuntimeError)):
            model(input_ids=ids)
