"""Span and tagging KD/CE on hand-made tensors: known values, masking, gradients."""

from __future__ import annotations

import math

import pytest
import torch

from tinyplm.train.head_losses import IGNORE, span_hard, span_kd, token_hard, token_kd


def test_span_kd_is_zero_for_equal_logits_and_ignores_padding() -> None:
    s = torch.tensor([[1.0, 2.0, 0.5, 9.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    assert float(span_kd(s, s, s, s, mask, 2.0)) == pytest.approx(0.0, abs=1e-6)
    t = s.clone()
    t[0, 3] = -9.0  # only the padding position differs
    assert float(span_kd(s, s, t, t, mask, 2.0)) == pytest.approx(0.0, abs=1e-6)


def test_span_kd_known_value() -> None:
    # two real positions; teacher (0, 0) -> p = (.5, .5); student (0, log 3) -> q = (.25, .75)
    t = torch.tensor([[0.0, 0.0]])
    s = torch.tensor([[0.0, math.log(3.0)]])
    mask = torch.ones(1, 2)
    kl = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert float(span_kd(s, s, t, t, mask, 1.0)) == pytest.approx(kl, rel=1e-5)


def test_span_hard_and_gradients() -> None:
    s_start = torch.zeros(1, 4, requires_grad=True)
    s_end = torch.zeros(1, 4, requires_grad=True)
    mask = torch.tensor([[1, 1, 0, 0]])
    loss = span_hard(s_start, s_end, torch.tensor([[1, 0]]), mask)
    assert float(loss.detach()) == pytest.approx(math.log(2.0), rel=1e-5)  # uniform over the two real positions
    loss.backward()
    assert s_start.grad[0, 1] < 0 and s_start.grad[0, 0] > 0 and s_start.grad[0, 2] == 0


def test_token_losses_only_at_labelled_pieces() -> None:
    s = torch.zeros(1, 3, 2, requires_grad=True)
    t = torch.tensor([[[0.0, 0.0], [5.0, -5.0], [0.0, 0.0]]])
    labels = torch.tensor([[IGNORE, 0, IGNORE]])
    kd = token_kd(s, t, labels, 1.0)
    p = torch.softmax(t[0, 1], -1)
    expected = float((p * (p.log() - math.log(0.5))).sum())
    assert float(kd.detach()) == pytest.approx(expected, rel=1e-5)
    assert float(token_hard(s, labels).detach()) == pytest.approx(math.log(2.0), rel=1e-5)
    (kd + token_hard(s, labels)).backward()
    assert s.grad[0, 0].abs().sum() == 0 and s.grad[0, 2].abs().sum() == 0 and s.grad[0, 1].abs().sum() > 0
    none = torch.full((1, 3), IGNORE)
    assert float(token_kd(s, t, none, 1.0).detach()) == 0.0 and float(token_hard(s, none).detach()) == 0.0
