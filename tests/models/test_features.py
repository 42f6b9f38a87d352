"""Named features of a tiny Hugging Face BERT forward, checked against transformers itself."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertModel

from tinyplm.models import roles
from tinyplm.models.factorized import share_layers
from tinyplm.models.features import (
    FEATURES,
    Features,
    forward_features,
    hidden_size,
    num_heads,
    num_layers,
)

B, S, H, HEADS, L = 2, 5, 32, 4, 2


def tiny_config(**kw) -> BertConfig:
    """The DESIGN.md tiny BERT: vocab 99, hidden 32, 2 layers, 4 heads, FFN 37."""
    base = dict(
        vocab_size=99, hidden_size=H, num_hidden_layers=L, num_attention_heads=HEADS,
        intermediate_size=37, max_position_embeddings=64,
    )
    return BertConfig(**{**base, **kw})


def tiny(cls=BertForSequenceClassification, attn: str = "sdpa", **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    model = cls(tiny_config(attn_implementation=attn, **kw))
    return model.eval()


def batch() -> dict[str, torch.Tensor]:
    """Two sequences of 5 tokens; the second has two padded positions."""
    ids = torch.tensor([[2, 10, 11, 12, 3], [2, 20, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    return {"input_ids": ids, "attention_mask": mask}


def all_hooks(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def qkv_hooks(model: torch.nn.Module) -> int:
    """Hooks on the Q/K/V Linear modules, where forward_features registers its own."""
    linears = [roles.layer_linear(x, n) for x in roles.layers(model) for n in ("query", "key", "value")]
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in linears)


def test_shapes_of_every_feature():
    model = tiny()
    f = forward_features(model, batch(), FEATURES)
    assert isinstance(f, Features)
    assert f.logits.shape == (B, 2)
    assert f.embeddings.shape == (B, S, H)
    assert torch.equal(f.attention_mask, batch()["attention_mask"])
    for name in ("hidden", "queries", "keys", "values"):
        assert [tuple(x.shape) for x in getattr(f, name)] == [(B, S, H)] * L, name
    for name in ("attn_scores", "attn_probs"):
        assert [tuple(x.shape) for x in getattr(f, name)] == [(B, HEADS, S, S)] * L, name


def test_probs_and_scores_match_eager_attentions_with_padding():
    model = tiny(attn="eager")
    inputs = batch()
    with torch.no_grad():
        ref = model(**inputs, output_attentions=True).attentions
        f = forward_features(model, inputs, ["attn_probs", "attn_scores"])
    for mine, theirs, scores in zip(f.attn_probs, ref, f.attn_scores, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)
        torch.testing.assert_close(scores.softmax(-1), mine)
        assert (scores[1, :, :, 3:] == torch.finfo(torch.float32).min).all()  # padded keys
        assert mine[1, :, :, 3:].abs().max() == 0


def test_hidden_and_embeddings_match_output_hidden_states():
    model = tiny()  # default sdpa attention
    with torch.no_grad():
        ref = model(**batch(), output_hidden_states=True).hidden_states
        f = forward_features(model, batch(), ["hidden", "embeddings"])
    torch.testing.assert_close(f.embeddings, ref[0])
    assert len(f.hidden) == L
    for mine, theirs in zip(f.hidden, ref[1:], strict=True):
        torch.testing.assert_close(mine, theirs)


def test_only_asked_features_are_filled():
    model = tiny()
    f = forward_features(model, batch(), ["values"])
    assert len(f.values) == L and f.logits is not None
    for name in FEATURES:
        if name != "values":
            assert getattr(f, name) is None, name
    f = forward_features(model, batch(), ["attn_probs"])  # Q/K captured, then dropped
    assert f.attn_probs is not None and f.queries is None and f.keys is None and f.attn_scores is None
    f = forward_features(model, batch(), [])
    assert all(getattr(f, name) is None for name in FEATURES)


def test_hooks_removed_after_call_and_after_error():
    model = tiny()
    # transformers 5 installs its own persistent output-capturing hooks on the first forward with
    # output_hidden_states; warm them up so the count below measures only ours.
    model(**batch(), output_hidden_states=True)
    before = all_hooks(model)
    forward_features(model, batch(), FEATURES)
    assert all_hooks(model) == before and qkv_hooks(model) == 0
    with pytest.raises(IndexError):
        forward_features(model, {"input_ids": torch.tensor([[200, 300]])}, ["queries"])  # id > vocab
    assert all_hooks(model) == before and qkv_hooks(model) == 0


def test_unknown_feature_raises_naming_valid_ones():
    with pytest.raises(ValueError, match="attn_probs"):
        forward_features(tiny(), batch(), ["hidden", "attention"])


def test_train_mode_probs_are_pre_dropout_and_differentiable():
    # attention dropout only: layer 1's inputs are untouched, so its pre-dropout probs equal eval's
    model = tiny(attn="eager", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.5)
    with torch.no_grad():
        ref = model(**batch(), output_attentions=True).attentions[0]
    model.train()
    torch.manual_seed(1)
    f = forward_features(model, batch(), ["attn_probs"])
    torch.testing.assert_close(f.attn_probs[0], ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(f.attn_probs[1].sum(-1), torch.ones(B, HEADS, S))
    f.attn_probs[1].pow(2).sum().backward()
    assert model.bert.encoder.layer[1].attention.self.query.weight.grad.abs().sum() > 0


def test_bare_bert_model_masked_lm_and_no_mask():
    bare = tiny(BertModel)
    f = forward_features(bare, {"input_ids": batch()["input_ids"]}, ["hidden", "keys"])
    assert f.logits is None and len(f.keys) == L
    assert torch.equal(f.attention_mask, torch.ones(B, S, dtype=torch.long))
    mlm = tiny(BertForMaskedLM)
    assert forward_features(mlm, batch(), ["embeddings"]).logits.shape == (B, S, 99)


def test_model_sizes(tiny_model_dir):
    model = BertForSequenceClassification.from_pretrained(tiny_model_dir)
    assert (num_layers(model), hidden_size(model), num_heads(model)) == (2, 32, 4)
    assert num_layers(model.bert) == 2
    with pytest.raises(ValueError, match="not in tinyplm's role table"):
        num_layers(torch.nn.Linear(2, 2))


def test_shared_attention_gives_one_feature_per_layer():
    # layers sharing one attention module: each layer's Q/K/V and probabilities are its own call's
    model = tiny(attn="eager")
    share_layers(model, "attention")
    plain = tiny(attn="eager")  # the same weights in unshared modules (transformers' own recorder
    plain.load_state_dict(model.state_dict())  # reports a shared module's attentions twice per call)
    with torch.no_grad():
        ref = plain(**batch(), output_attentions=True).attentions
    f = forward_features(model, batch(), ["attn_probs", "queries"])
    assert len(f.queries) == L and len(f.attn_probs) == L
    assert not torch.allclose(f.queries[0], f.queries[1])  # layer 1 sees layer 0's output, not the embeddings
    for mine, theirs in zip(f.attn_probs, ref, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)
