"""4-bit weights: packing exact to its grid, small on disk, identical after save and load (the
other schemes' round trips are in the compress contract test)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from torch import nn
from transformers import BertConfig, BertForSequenceClassification

from conftest import make_tiny_model_dir
from tinyplm.models import load_classifier, roles, save_model
from tinyplm.models.factorized import share_layers
from tinyplm.models.quantized import Int4Linear, encoder_linear_names, quantize_int4, quantize_int8_dynamic, to_bf16

LABELS = ("negative", "positive")


def test_int4_packing_matches_the_grid() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(40, 6)  # 40 is not a multiple of the group: rows are padded
    q = Int4Linear.from_linear(linear, group_size=16)
    w = q.weight()
    assert w.shape == (6, 40) and q.packed.shape == (6, 24) and q.scales.shape == (6, 3)
    scales = q.scales.float().repeat_interleave(16, dim=1)[:, :40]
    steps = w / scales
    assert torch.allclose(steps, steps.round(), atol=1e-4) and steps.abs().max() <= 8
    assert (w - linear.weight).abs().le(scales / 2 + 1e-6).all()  # error at most half a step
    x = torch.randn(3, 40)
    assert torch.allclose(q(x), nn.functional.linear(x, w, linear.bias), atol=1e-6)


def test_int4_linear_weights_take_under_a_sixth_of_fp32_bytes(tmp_path: Path) -> None:
    tok_dir = make_tiny_model_dir(tmp_path / "tok")
    _, tok = load_classifier(tok_dir, LABELS, False)
    cfg = BertConfig(vocab_size=99, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=512, max_position_embeddings=64)
    model = BertForSequenceClassification(cfg)
    names = encoder_linear_names(model)
    fp32 = sum(model.get_submodule(n).weight.numel() * 4 for n in names)
    quantize_int4(model, group_size=64)
    out = save_model(model, tok, tmp_path / "int4")
    with safe_open(str(out / "model.safetensors"), framework="pt") as fh:
        stored = sum(fh.get_tensor(k).numel() * fh.get_tensor(k).element_size()
                     for k in fh.keys() if k.endswith((".packed", ".scales")))
    assert stored <= fp32 / 6
    loaded, _ = load_classifier(out, LABELS, False)
    ids = torch.randint(5, 99, (2, 9))
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, model.eval()(input_ids=ids).logits)


@pytest.mark.parametrize("scheme", ["dynamic_int8", "int4_weight", "bf16"])
def test_a_shared_model_quantized_saves_once_and_reloads_shared(scheme: str, tmp_path: Path) -> None:
    """``share`` then a torch quantization step: the shared tensors are stored once (safetensors
    refuses the same memory under two names) and the reloaded model shares them again, with the
    same outputs."""
    model, tok = load_classifier(make_tiny_model_dir(tmp_path / "m"), LABELS, False)
    share_layers(model, "all")
    quantize = {"dynamic_int8": quantize_int8_dynamic, "int4_weight": lambda m: quantize_int4(m, 8), "bf16": to_bf16}
    quantize[scheme](model)
    out = save_model(model, tok, tmp_path / "q")
    loaded, _ = load_classifier(out, LABELS, False)
    ids = torch.randint(5, 99, (2, 9))
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, model.eval()(input_ids=ids).logits)
    first, second = roles.layers(loaded)[:2]
    part = roles.part_names(first, "attention")[0]
    assert roles.layer_part(first, part) is roles.layer_part(second, part)
    with safe_open(str(out / "model.safetensors"), framework="pt") as fh:
        assert not [k for k in fh.keys() if k.startswith("bert.encoder.layer.1.")]


@pytest.mark.parametrize("scheme", ["dynamic_int8", "int4_weight"])
def test_a_shared_linear_part_is_quantized_in_every_layer_that_runs_it(scheme: str, tmp_path: Path) -> None:
    """ALBERT's FFN part is a Linear itself: after ``share`` every layer holds it, and quantizing it
    under its first layer's name alone left the other layers running the fp32 one (and the saved
    model unloadable). Every layer now runs one quantized module, saved once and reloaded tied."""
    from helpers_families import make_family_dir

    model, tok = load_classifier(make_family_dir(tmp_path / "albert", "albert"), LABELS, False)
    share_layers(model, "all")
    quantize = {"dynamic_int8": quantize_int8_dynamic, "int4_weight": lambda m: quantize_int4(m, 8)}
    quantize[scheme](model)
    layers = roles.layers(model)
    ffn = [roles.layer_part(layer, roles.part_names(layer, "ffn")[0]) for layer in layers]
    assert not any(type(m) is nn.Linear for m in ffn) and all(m is ffn[0] for m in ffn)
    loaded, _ = load_classifier(save_model(model, tok, tmp_path / "q"), LABELS, False)
    ids = torch.randint(5, 40, (2, 9))
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, model.eval()(input_ids=ids).logits)
