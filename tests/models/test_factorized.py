"""Cross-layer sharing, low-rank Linear layers and factorized embeddings on a tiny random BERT: each
saves the parameters it claims, keeps what it should of the model's function, and survives save/load."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from conftest import make_tiny_model_dir
from tinyplm.errors import ModelError
from tinyplm.models import load_classifier, roles, save_model
from tinyplm.models.factorized import (
    FactorizedEmbedding,
    LowRankLinear,
    choose_rank,
    factorize_embeddings,
    factorize_linear,
    factorize_roles,
    share_layers,
)
from tinyplm.models.shape import params_from_config, record_shape

V, H, F, L = 99, 32, 37, 2
ATTENTION = 4 * (H * H + H) + 2 * H  # Q, K, V, output Linear + LayerNorm
FFN = (H * F + F) + (F * H + H) + 2 * H  # two Linear + LayerNorm
IDS = torch.tensor([[2, 10, 11, 12, 13, 3, 0, 0], [2, 20, 21, 3, 0, 0, 0, 0]])
MASK = (IDS != 0).long()


def tiny() -> BertForSequenceClassification:
    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L,
                                                    num_attention_heads=4, intermediate_size=F,
                                                    max_position_embeddings=64)).eval()


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(input_ids=IDS, attention_mask=MASK).logits


def count(model) -> int:
    return sum(p.numel() for p in model.parameters())  # a shared tensor counts once


def save_config(model):
    """The config as saving writes it (the structure recorded)."""
    record_shape(model)
    return model.config


def query(model, i: int) -> torch.nn.Module:
    return roles.layer_linear(roles.layers(model)[i], "query")


# ---------------------------------------------------------------------------------------------
# sharing


def test_share_all_keeps_one_layer_of_weights_as_one_tensor() -> None:
    model = tiny()
    before = count(model)
    assert share_layers(model) == [[0, 1]]
    assert before - count(model) == ATTENTION + FFN  # the second layer's weights are gone
    a, b = query(model, 0).weight, query(model, 1).weight
    assert a.data_ptr() == b.data_ptr()
    with torch.no_grad():
        a[0, 0] = 5.0
    assert b[0, 0] == 5.0  # one tensor, not two equal copies
    assert params_from_config(save_config(model)) == count(model)


def test_share_ffn_only_leaves_attention_alone() -> None:
    model = tiny()
    before = count(model)
    mean = (roles.layer_linear(roles.layers(model)[0], "ffn_in").weight
            + roles.layer_linear(roles.layers(model)[1], "ffn_in").weight).detach() / 2
    share_layers(model, "ffn")
    assert before - count(model) == FFN
    assert query(model, 0).weight.data_ptr() != query(model, 1).weight.data_ptr()
    shared = roles.layer_linear(roles.layers(model)[1], "ffn_in")
    assert shared is roles.layer_linear(roles.layers(model)[0], "ffn_in")
    assert torch.allclose(shared.weight, mean)  # initialised from the group's mean
    with pytest.raises(ModelError, match="sharing mode"):
        share_layers(model, "heads")


def test_shared_model_saves_then_loads_tied_with_equal_logits(tmp_path: Path) -> None:
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), ("negative", "positive"), False)
    share_layers(model)
    expected = logits(model)
    loaded, _ = load_classifier(save_model(model, tok, tmp_path / "shared"), ("negative", "positive"), False)
    assert torch.equal(logits(loaded), expected)
    assert query(loaded, 0).weight.data_ptr() == query(loaded, 1).weight.data_ptr()
    assert count(loaded) == count(model)


# ---------------------------------------------------------------------------------------------
# low-rank Linear layers


def test_factorize_roles_by_ratio_saves_the_parameters_of_its_ranks() -> None:
    model = tiny()
    before = count(model)
    ranks = factorize_roles(model, {"query": {"ratio": 0.25}, "ffn_in": {"ratio": 0.25}})
    assert sorted(ranks) == sorted(roles.linear_name(model, i, r) for i in range(L) for r in ("query", "ffn_in"))
    assert set(ranks.values()) == {8}  # a quarter of min(in, out) = 32
    modules = dict(model.named_modules())
    assert all(isinstance(modules[n], LowRankLinear) and modules[n].rank == r for n, r in ranks.items())
    saved = sum(m.in_features * m.out_features - m.rank * (m.in_features + m.out_features)
                for m in (modules[n] for n in ranks))
    assert before - count(model) == saved > 0
    assert params_from_config(save_config(model)) == count(model)


def test_full_energy_of_low_rank_weights_keeps_the_logits() -> None:
    model = tiny()
    torch.manual_seed(1)
    with torch.no_grad():  # every query and FFN input weight of rank 4: its SVD at full energy is exact
        for layer in roles.layers(model):
            for role in ("query", "ffn_in"):
                w = roles.layer_linear(layer, role).weight
                w.copy_(torch.randn(w.shape[0], 4) @ torch.randn(4, w.shape[1]) / 4)
    expected, before = logits(model), count(model)
    ranks = factorize_roles(model, {"query": {"energy": 1.0 - 1e-9}, "ffn_in": {"energy": 1.0 - 1e-9}})
    assert set(ranks.values()) == {4} and count(model) < before
    torch.testing.assert_close(logits(model), expected, atol=1e-5, rtol=1e-4)


def test_factorize_linear_at_ratio_one_is_the_same_map() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 12)
    low = factorize_linear(linear, ratio=1.0)
    x = torch.randn(5, 16)
    assert low.rank == 12
    torch.testing.assert_close(low(x), linear(x), atol=1e-5, rtol=1e-5)


def test_factorize_roles_refuses_an_unknown_role() -> None:
    with pytest.raises(ModelError, match="unknown role 'gate'"):
        factorize_roles(tiny(), {"gate": {"ratio": 0.5}})


# ---------------------------------------------------------------------------------------------
# factorized embeddings


def test_factorize_embeddings_is_the_truncated_svd_of_the_table() -> None:
    model = tiny()
    table = roles.word_embeddings(model).weight.detach().clone()
    before = count(model)
    new = factorize_embeddings(model, 8)
    assert roles.word_embeddings(model) is new and isinstance(new, FactorizedEmbedding)
    assert before - count(model) == V * H - (V * 8 + 8 * H)
    u, s, vh = torch.linalg.svd(table, full_matrices=False)
    torch.testing.assert_close(new.weight, u[:, :8] @ torch.diag(s[:8]) @ vh[:8], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(new(IDS), new.weight[IDS])
    with pytest.raises(ModelError, match="already factorized"):
        factorize_embeddings(model, 4)
    with pytest.raises(ModelError, match="rank must be in 1..31"):
        factorize_embeddings(tiny(), 32)


# ---------------------------------------------------------------------------------------------
# choosing a rank


def test_choose_rank_by_ratio_and_by_energy() -> None:
    s = torch.tensor([4.0, 2.0, 1.0, 1.0])  # squares 16, 4, 1, 1 of 22: cumulative .727, .909, .955, 1
    assert [choose_rank(s, energy=e) for e in (0.5, 0.727, 0.9, 0.95, 0.96, 1.0)] == [1, 1, 2, 3, 4, 4]
    assert [choose_rank(s, ratio=r) for r in (0.01, 0.5, 0.75, 1.0)] == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="exactly one"):
        choose_rank(s)
    with pytest.raises(ValueError, match="exactly one"):
        choose_rank(s, ratio=0.5, energy=0.5)
