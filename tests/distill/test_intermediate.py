"""Layer-wise distillation losses on hand-made tensors with known values."""

from __future__ import annotations

import math

import pytest
import torch

from tinyplm.distill.intermediate import (
    attention_kl,
    attention_score_mse,
    cosine_hidden,
    embedding_mse,
    hidden_mse,
    make_projection,
    self_relation_kl,
    value_relation_kl,
)

NEG = torch.finfo(torch.float32).min
MASK3 = torch.tensor([[1, 1, 0]])  # batch 1, seq 3, last token padded


def t(x) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float32)


# --- hidden / embedding MSE ---------------------------------------------------------------------


def test_hidden_mse_known_value_and_mask():
    s = t([[[1, 2], [3, 4], [9, 9]]])
    te = t([[[1, 0], [3, 0], [0, 0]]])
    # real tokens: (0 + 4) + (0 + 16) = 20 over 2 tokens * 2 features
    assert hidden_mse(s, te, MASK3).item() == pytest.approx(5.0)
    s2 = s.clone()
    s2[0, 2] = t([-100, 55])
    assert hidden_mse(s2, te, MASK3).item() == pytest.approx(5.0)
    assert embedding_mse is hidden_mse


def test_hidden_mse_zero_when_equal():
    x = torch.randn(2, 3, 4)
    assert hidden_mse(x, x.clone(), torch.ones(2, 3)).item() == 0.0


def test_hidden_mse_projection_gets_gradients():
    proj = make_projection(3, 2)
    assert isinstance(proj, torch.nn.Linear) and make_projection(4, 4) is None
    with torch.no_grad():
        proj.weight.copy_(t([[1, 0, 0], [0, 1, 0]]))
        proj.bias.zero_()
    s = t([[[1, 2, 7], [3, 4, 7], [9, 9, 9]]]).requires_grad_()
    te = t([[[1, 0], [3, 0], [0, 0]]])
    loss = hidden_mse(s, te, MASK3, proj)
    assert loss.item() == pytest.approx(5.0)
    loss.backward()
    assert proj.weight.grad.abs().sum() > 0 and proj.bias.grad.abs().sum() > 0
    assert s.grad[0, :2].abs().sum() > 0
    assert s.grad[0, 2].abs().sum() == 0  # padding gets no gradient


def test_hidden_mse_errors():
    with pytest.raises(ValueError, match="make_projection"):
        hidden_mse(torch.zeros(1, 2, 3), torch.zeros(1, 2, 4), torch.ones(1, 2))
    with pytest.raises(ValueError, match="equal batch and seq"):
        hidden_mse(torch.zeros(1, 2, 4), torch.zeros(1, 3, 4), torch.ones(1, 2))
    with pytest.raises(ValueError, match="mask has shape"):
        hidden_mse(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.ones(1, 3))


def test_hidden_mse_float32_math_for_bf16():
    x = torch.randn(1, 2, 4).bfloat16()
    assert hidden_mse(x, x + 1, torch.ones(1, 2)).dtype == torch.float32


# --- DistilBERT cosine ---------------------------------------------------------------------------


def test_cosine_hidden_known_value_and_mask():
    s = t([[[1, 0], [0, 1], [5, 5]]])
    te = t([[[2, 0], [1, 0], [-1, 3]]])
    # cos = 1 and 0 on the real tokens -> mean(0, 1) = 0.5
    assert cosine_hidden(s, te, MASK3).item() == pytest.approx(0.5)
    s[0, 2] = t([-3, 8])
    assert cosine_hidden(s, te, MASK3).item() == pytest.approx(0.5)
    assert cosine_hidden(te, te, MASK3).item() == pytest.approx(0.0, abs=1e-6)


def test_cosine_hidden_width_and_projection():
    with pytest.raises(ValueError, match="width"):
        cosine_hidden(torch.randn(1, 2, 3), torch.randn(1, 2, 4), torch.ones(1, 2))
    proj = make_projection(3, 4)
    cosine_hidden(torch.randn(1, 2, 3), torch.randn(1, 2, 4), torch.ones(1, 2), proj).backward()
    assert proj.weight.grad.abs().sum() > 0


# --- TinyBERT attention scores -------------------------------------------------------------------


def scores3(valid_block, pad_value=NEG):
    """(1, 1, 3, 3) scores: a 2x2 real block, padded key column at pad_value, pad row arbitrary."""
    x = torch.full((1, 1, 3, 3), 7.0)
    x[0, 0, :, 2] = pad_value
    x[0, 0, :2, :2] = t(valid_block)
    return x


def test_attention_score_mse_known_value_and_mask():
    s = scores3([[1, 2], [3, 4]])
    te = scores3([[0, 2], [3, 0]], pad_value=-10000.0)
    # (1 + 0 + 0 + 16) / 4 real (query, key) pairs
    assert attention_score_mse(s, te, MASK3).item() == pytest.approx(17 / 4)
    s[0, 0, 2, :] = t([100, -5, 3])  # padded query row
    s[0, 0, :2, 2] = t([42, 42])  # padded key column with a non-masked value
    assert attention_score_mse(s, te, MASK3).item() == pytest.approx(17 / 4)
    assert attention_score_mse(te, te.clone(), MASK3).item() == 0.0


def test_attention_score_mse_tinybert_threshold():
    s = scores3([[-500, 2], [3, 4]])  # <= -100 counts as masked and becomes 0
    te = scores3([[0, 2], [3, 0]])
    assert attention_score_mse(s, te, MASK3).item() == pytest.approx(16 / 4)


def test_attention_score_mse_two_heads_mean_and_grad():
    s = torch.zeros(1, 2, 2, 2, requires_grad=True)
    te = torch.stack([torch.ones(2, 2), 3 * torch.ones(2, 2)])[None]
    loss = attention_score_mse(s, te, torch.ones(1, 2))
    assert loss.item() == pytest.approx((1 + 9) / 2)
    loss.backward()
    assert s.grad.abs().sum() > 0


def test_attention_losses_need_equal_heads():
    a, b = torch.zeros(1, 2, 3, 3), torch.zeros(1, 4, 3, 3)
    with pytest.raises(ValueError, match="2 heads, teacher 4"):
        attention_score_mse(a, b, torch.ones(1, 3))
    with pytest.raises(ValueError, match="2 heads, teacher 4"):
        attention_kl(a.softmax(-1), b.softmax(-1), torch.ones(1, 3))
    with pytest.raises(ValueError, match="shapes differ"):
        attention_kl(a, torch.zeros(1, 2, 4, 4), torch.ones(1, 3))


# --- MiniLM attention distributions --------------------------------------------------------------


def test_attention_kl_known_value():
    te = t([[[[0.5, 0.5], [1.0, 0.0]]]])
    s = t([[[[0.25, 0.75], [0.5, 0.5]]]]).requires_grad_()
    row0 = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    row1 = math.log(1.0 / 0.5)
    loss = attention_kl(s, te, torch.ones(1, 2))
    assert loss.item() == pytest.approx((row0 + row1) / 2, abs=1e-6)
    loss.backward()
    assert s.grad.abs().sum() > 0
    assert attention_kl(te, te.clone(), torch.ones(1, 2)).item() == pytest.approx(0.0, abs=1e-6)


def test_attention_kl_ignores_padding():
    te = torch.zeros(1, 1, 3, 3)
    te[0, 0, :, :2] = t([[0.5, 0.5], [1.0, 0.0], [0.3, 0.7]])
    s = torch.zeros(1, 1, 3, 3)
    s[0, 0, :, :2] = t([[0.25, 0.75], [0.5, 0.5], [0.9, 0.1]])
    base = attention_kl(s, te, MASK3)
    s[0, 0, 2] = t([0.1, 0.1, 0.8])  # padded query row
    s[0, 0, :2, 2] = 0.3  # padded key column
    assert attention_kl(s, te, MASK3).item() == pytest.approx(base.item())
    expected = (0.5 * math.log(2) + 0.5 * math.log(2 / 3) + math.log(2)) / 2
    assert base.item() == pytest.approx(expected, abs=1e-6)


# --- MiniLM / MiniLMv2 relations -----------------------------------------------------------------


def diag_teacher(width: int = 2) -> torch.Tensor:
    """(1, 3, width) whose one-head relation over the 2 real tokens is [[.75, .25], [.25, .75]]."""
    a = math.sqrt(math.sqrt(width) * math.log(3))  # a^2 / sqrt(width) = ln 3
    x = torch.zeros(1, 3, width)
    x[0, 0, 0] = a
    x[0, 1, 1] = a
    x[0, 2] = 4.0  # padded token
    return x


KL_DIAG_VS_UNIFORM = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)


def test_self_relation_kl_known_value_and_mask():
    te = diag_teacher()
    s = torch.zeros(1, 3, 4)  # any width: zero vectors give a uniform relation
    assert self_relation_kl(s, te, 1, MASK3).item() == pytest.approx(KL_DIAG_VS_UNIFORM, abs=1e-6)
    s[0, 2] = 9.0
    te[0, 2] = -3.0
    assert self_relation_kl(s, te, 1, MASK3).item() == pytest.approx(KL_DIAG_VS_UNIFORM, abs=1e-6)


def test_self_relation_kl_relation_heads_split_each_width():
    one = diag_teacher(2)
    te = torch.cat([one, one], dim=-1)  # width 4, two relation heads with the same relation
    s = torch.zeros(1, 3, 6)  # width 6 -> two heads of 3
    assert self_relation_kl(s, te, 2, MASK3).item() == pytest.approx(KL_DIAG_VS_UNIFORM, abs=1e-6)
    with pytest.raises(ValueError, match="4 relation heads do not divide hidden size 6"):
        self_relation_kl(s, te, 4, MASK3)


def reference_relation_kl(s: torch.Tensor, te: torch.Tensor, heads: int, n_real: int) -> float:
    """Straightforward loops over heads and rows on the first ``n_real`` tokens (batch 1)."""
    total, count = 0.0, 0
    for h in range(heads):
        rel = []
        for x in (s[0, :n_real], te[0, :n_real]):
            d = x.shape[-1] // heads
            xh = x[:, h * d : (h + 1) * d].double()
            rel.append(torch.softmax(xh @ xh.T / math.sqrt(d), dim=-1))
        for q in range(n_real):
            total += float((rel[1][q] * (rel[1][q] / rel[0][q]).log()).sum())
            count += 1
    return total / count


def test_self_relation_kl_matches_reference_and_grads():
    torch.manual_seed(0)
    s = torch.randn(1, 3, 4, requires_grad=True)
    te = torch.randn(1, 3, 6)
    loss = self_relation_kl(s, te, 2, MASK3)
    assert loss.item() == pytest.approx(reference_relation_kl(s.detach(), te, 2, 2), abs=1e-5)
    loss.backward()
    assert s.grad[0, :2].abs().sum() > 0 and s.grad[0, 2].abs().sum() == 0
    assert self_relation_kl(te, te.clone(), 3, MASK3).item() == pytest.approx(0.0, abs=1e-6)


def test_value_relation_kl_equal_heads_only():
    torch.manual_seed(1)
    s, te = torch.randn(1, 3, 4), torch.randn(1, 3, 8)
    assert value_relation_kl(s, te, 2, 2, MASK3).item() == pytest.approx(
        reference_relation_kl(s, te, 2, 2), abs=1e-5
    )
    with pytest.raises(ValueError, match="student has 2 heads, teacher 4"):
        value_relation_kl(s, te, 2, 4, MASK3)


def test_all_padding_mask_rejected():
    with pytest.raises(ValueError, match="no real"):
        self_relation_kl(torch.randn(1, 2, 4), torch.randn(1, 2, 4), 1, torch.zeros(1, 2))
