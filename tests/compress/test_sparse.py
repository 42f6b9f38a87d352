"""Unstructured sparsity: cubic schedule, magnitude and movement masks, permanent zeros, CSR size."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from tinyplm.compress.sparse import Sparsifier, csr_bytes, cubic_sparsity, sparsity_of
from tinyplm.models.quantized import encoder_linear_names


def _model() -> BertForSequenceClassification:
    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                                    num_attention_heads=4, intermediate_size=37))


def test_cubic_schedule() -> None:
    assert cubic_sparsity(0.0, 0.8) == 0.0
    assert cubic_sparsity(0.9, 0.8, final_fraction=0.1) == pytest.approx(0.8)
    assert cubic_sparsity(1.0, 0.8) == pytest.approx(0.8)
    assert cubic_sparsity(0.45, 0.8, final_fraction=0.1) == pytest.approx(0.8 * (1 - 0.5 ** 3))
    values = [cubic_sparsity(t / 20, 0.9) for t in range(21)]
    assert values == sorted(values)  # never decreases


def test_magnitude_prunes_the_smallest_weights_globally() -> None:
    model = _model()
    sp = Sparsifier(model, "magnitude", 0.5)
    weights = torch.cat([model.get_submodule(n).weight_orig.detach().abs().flatten() for n in sp.names])
    sp.apply(0.5)
    kept = torch.cat([model.get_submodule(n).weight_mask.flatten() for n in sp.names]).bool()
    assert kept.float().mean().item() == pytest.approx(0.5, abs=1e-3)
    assert weights[kept].min() >= weights[~kept].max()
    info = sp.finalize()
    assert info["sparsity"] == pytest.approx(0.5, abs=1e-3) and sparsity_of(model) == pytest.approx(0.5, abs=1e-3)
    assert not hasattr(model.get_submodule(sp.names[0]), "weight_orig")  # re-parametrisation removed
    assert all(isinstance(model.get_submodule(n).weight, torch.nn.Parameter) for n in sp.names)


def test_per_layer_scope_prunes_each_layer_equally() -> None:
    model = _model()
    sp = Sparsifier(model, "magnitude", 0.3, scope="layer")
    sp.finalize()
    for n in encoder_linear_names(model):
        w = model.get_submodule(n).weight
        assert (w == 0).float().mean().item() == pytest.approx(0.3, abs=0.02)


def test_schedule_through_the_step_hook_and_masks_only_grow() -> None:
    model = _model()
    sp = Sparsifier(model, "magnitude", 0.6, update_every=1, final_fraction=0.0)
    seen = []
    for step in range(1, 11):
        sp.on_step(step / 10)
        seen.append(1 - torch.cat([model.get_submodule(n).weight_mask.flatten() for n in sp.names]).mean().item())
    assert seen == sorted(seen) and seen[-1] == pytest.approx(0.6, abs=1e-3)


def test_movement_scores_follow_the_gradient_and_prune_weights_moving_to_zero() -> None:
    model = _model()
    sp = Sparsifier(model, "movement", 0.5, update_every=1)
    ids = torch.randint(5, 99, (4, 8))
    loss = model(input_ids=ids, labels=torch.tensor([0, 1, 0, 1])).loss
    loss.backward()
    m = model.get_submodule(sp.names[0])
    expected = -(m.weight_orig.detach() * m.weight_orig.grad)  # mask is all ones: same gradient
    assert torch.allclose(sp.scores[0], expected, atol=1e-7)
    sp.apply(0.5)
    all_scores = torch.cat([s.flatten() for s in sp.scores])
    all_kept = torch.cat([model.get_submodule(n).weight_mask.flatten() for n in sp.names]).bool()
    assert all_scores[all_kept].min() >= all_scores[~all_kept].max()


def test_csr_file_is_smaller_when_sparse(tmp_path: Path) -> None:
    model = _model()
    dense = csr_bytes(model, tmp_path / "dense.safetensors")
    sp = Sparsifier(model, "magnitude", 0.9)
    sp.finalize()
    sparse = csr_bytes(model, tmp_path / "sparse.safetensors")
    assert sparse < dense
