"""Fake quantization for QAT: int8 grids, straight-through gradients, baked-in weights."""

from __future__ import annotations

import torch
from transformers import BertConfig, BertForSequenceClassification

from tinyplm.compress.qat import FakeQuant, fake_quant_input, fake_quant_weight


def test_weight_grid_and_straight_through_gradient() -> None:
    w = torch.randn(4, 10, requires_grad=True)
    q = fake_quant_weight(w)
    scale = w.detach().abs().amax(1, keepdim=True) / 127
    steps = q.detach() / scale
    assert torch.allclose(steps, steps.round(), atol=1e-4) and steps.abs().max() <= 127 + 1e-4
    assert (q - w).abs().max() <= scale.max() / 2 + 1e-6
    q.sum().backward()
    assert torch.equal(w.grad, torch.ones_like(w))  # the rounding is invisible to the gradient


def test_input_grid_has_256_levels_over_its_range() -> None:
    x = torch.linspace(-1, 3, 1000)
    q = fake_quant_input(x, -1.0, 3.0)
    assert len(torch.unique(q)) <= 256 and (q - x).abs().max() <= 4 / 255 / 2 + 1e-6


def test_fake_quant_trains_then_bakes_grid_weights() -> None:
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=4, intermediate_size=37))
    fq = FakeQuant(model)
    ids = torch.randint(5, 99, (4, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.bert.encoder.layer[0].intermediate.dense.parametrizations.weight.original.detach().clone()
    model.train()(input_ids=ids, labels=torch.tensor([0, 1, 0, 1])).loss.backward()
    opt.step()
    after = model.bert.encoder.layer[0].intermediate.dense.parametrizations.weight.original.detach()
    assert not torch.equal(before, after)  # the float weights behind the grid train
    assert all(r is not None for r in fq.ranges)
    fq.remove()
    w = model.bert.encoder.layer[0].intermediate.dense.weight.detach()
    steps = w / (w.abs().amax(1, keepdim=True) / 127)
    assert torch.allclose(steps, steps.round(), atol=1e-3)  # baked on the int8 grid
    assert not hasattr(model.bert.encoder.layer[0].intermediate.dense, "parametrizations")
