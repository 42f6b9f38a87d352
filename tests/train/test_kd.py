"""Distillation losses: hand-computed values, T^2 scaling, gradients, objective mixing."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tinyplm.tasks.base import UNLABELLED_CLASS
from tinyplm.train.kd import hard_label_loss, regression_kd, soft_target_kd
from tinyplm.train.prediction import PredictionObjective

# Two examples, three classes; small integers so the softmaxes are easy to check by hand.
STUDENT = [[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]]
TEACHER = [[2.0, 0.0, 1.0], [3.0, 1.0, -1.0]]


def np_softmax(x: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_kd(student: list[list[float]], teacher: list[list[float]], t: float) -> float:
    """T^2 * mean over rows of sum_c p_t log(p_t / p_s), computed in numpy float64."""
    p_s = np_softmax(np.asarray(student, dtype=np.float64) / t)
    p_t = np_softmax(np.asarray(teacher, dtype=np.float64) / t)
    return float((p_t * np.log(p_t / p_s)).sum(-1).mean() * t * t)


def test_kd_on_one_hand_computed_pair() -> None:
    # s = [0, 0] -> p_s = [1/2, 1/2]; t = [ln 3, 0] -> p_t = [3/4, 1/4].
    # KL = 3/4 ln(3/2) + 1/4 ln(1/2) at T = 1.
    s = torch.tensor([[0.0, 0.0]])
    t = torch.tensor([[math.log(3.0), 0.0]])
    expected = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    assert soft_target_kd(s, t, 1.0).item() == pytest.approx(expected, rel=1e-5)
    # At T = 2 the logits halve: t/2 = [ln sqrt 3, 0] -> p_t = [sqrt3/(1+sqrt3), 1/(1+sqrt3)].
    r3 = math.sqrt(3.0)
    q = [r3 / (1 + r3), 1 / (1 + r3)]
    expected_t2 = 4.0 * (q[0] * math.log(q[0] / 0.5) + q[1] * math.log(q[1] / 0.5))
    assert soft_target_kd(s, t, 2.0).item() == pytest.approx(expected_t2, rel=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_kd_matches_numpy_mean_over_batch(temperature: float) -> None:
    got = soft_target_kd(torch.tensor(STUDENT), torch.tensor(TEACHER), temperature).item()
    assert got == pytest.approx(np_kd(STUDENT, TEACHER, temperature), rel=1e-5)
    # Mean over the batch: the average of the two one-row losses.
    rows = [np_kd([s], [t], temperature) for s, t in zip(STUDENT, TEACHER, strict=True)]
    assert got == pytest.approx(sum(rows) / 2, rel=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.0])
def test_kd_equals_torch_kl_div_batchmean_times_t_squared(temperature: float) -> None:
    torch.manual_seed(0)
    s, t = torch.randn(5, 4), torch.randn(5, 4)
    ref = F.kl_div(
        F.log_softmax(s / temperature, -1), F.log_softmax(t / temperature, -1),
        reduction="batchmean", log_target=True,
    ) * temperature * temperature
    assert soft_target_kd(s, t, temperature).item() == pytest.approx(ref.item(), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_kd_is_zero_when_student_equals_teacher(temperature: float) -> None:
    torch.manual_seed(1)
    logits = torch.randn(4, 3)
    assert soft_target_kd(logits.clone(), logits.clone(), temperature).item() == pytest.approx(0.0, abs=1e-6)


def test_kd_gradient_reaches_student_only() -> None:
    s = torch.tensor(STUDENT, requires_grad=True)
    t = torch.tensor(TEACHER, requires_grad=True)
    soft_target_kd(s, t.detach(), 2.0).backward()
    assert s.grad is not None and s.grad.abs().sum() > 0
    assert t.grad is None
    # d/ds [T^2 KL] = T (p_s - p_t) / batch for softened distributions.
    p_s = np_softmax(np.asarray(STUDENT) / 2.0)
    p_t = np_softmax(np.asarray(TEACHER) / 2.0)
    np.testing.assert_allclose(s.grad.numpy(), 2.0 * (p_s - p_t) / 2, rtol=1e-4, atol=1e-6)


def test_hard_label_loss_classification_is_cross_entropy() -> None:
    logits = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0]])
    labels = torch.tensor([1, 0])
    # Row 0: -ln(1/2); row 1: -ln(3/4).
    expected = (math.log(2.0) - math.log(0.75)) / 2
    got = hard_label_loss(logits, labels, is_regression=False)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    assert got.item() == pytest.approx(F.cross_entropy(logits, labels).item(), rel=1e-6)


def test_hard_label_loss_regression_is_mse_on_squeezed_logits() -> None:
    logits = torch.tensor([[1.0], [3.0], [0.5]])  # (batch, 1)
    labels = torch.tensor([0.0, 1.0, 0.5])
    # ((1-0)^2 + (3-1)^2 + 0^2) / 3 = 5/3; no broadcasting to (3, 3).
    assert hard_label_loss(logits, labels, is_regression=True).item() == pytest.approx(5 / 3, rel=1e-6)


@pytest.mark.parametrize("weights", [None, torch.tensor([1.0, 3.0])])
def test_unlabelled_rows_are_skipped_by_the_hard_loss(weights) -> None:
    """Corpus texts beside the task's examples (``data: task+corpus``) carry no label: the hard loss
    is the labelled rows' alone, whatever the unlabelled rows' logits, and they get no gradient."""
    logits = torch.tensor([[0.0, 0.0], [5.0, -5.0], [math.log(3.0), 0.0], [-2.0, 7.0]], requires_grad=True)
    labels = torch.tensor([1, UNLABELLED_CLASS, 0, UNLABELLED_CLASS])
    got = hard_label_loss(logits, labels, False, weights)
    assert got.item() == pytest.approx(F.cross_entropy(logits[[0, 2]], labels[[0, 2]], weight=weights).item())
    got.backward()
    assert logits.grad[[1, 3]].abs().sum() == 0 and logits.grad[[0, 2]].abs().sum() > 0


def test_a_batch_of_unlabelled_rows_only_gives_zero_and_still_backpropagates() -> None:
    logits = torch.randn(3, 2, requires_grad=True)
    got = hard_label_loss(logits, torch.full((3,), UNLABELLED_CLASS), is_regression=False)
    assert got.item() == 0.0 and got.requires_grad
    scores = torch.randn(2, 1, requires_grad=True)
    assert hard_label_loss(scores, torch.tensor([float("nan")] * 2), is_regression=True).item() == 0.0


def test_nan_scores_are_unlabelled_rows_of_a_regression_task() -> None:
    logits = torch.tensor([[1.0], [100.0], [3.0]])
    labels = torch.tensor([0.0, float("nan"), 1.0])
    assert hard_label_loss(logits, labels, is_regression=True).item() == pytest.approx((1 + 4) / 2, rel=1e-6)


def test_regression_kd_is_mse_to_teacher() -> None:
    s = torch.tensor([[1.0], [2.0]])
    t = torch.tensor([[0.0], [4.0]])
    assert regression_kd(s, t).item() == pytest.approx((1 + 4) / 2, rel=1e-6)
    assert regression_kd(t, t).item() == 0.0


def test_objective_hard_only_is_fine_tuning() -> None:
    obj = PredictionObjective(kd_weight=0.0, hard_weight=1.0)
    assert not obj.needs_teacher_logits and not obj.needs_teacher
    logits, labels = torch.tensor(STUDENT), torch.tensor([1, 0])
    loss, parts = obj(logits, labels)  # no teacher logits needed
    assert set(parts) == {"hard"}
    assert loss.item() == pytest.approx(F.cross_entropy(logits, labels).item(), rel=1e-6)


def test_objective_kd_only() -> None:
    obj = PredictionObjective(kd_weight=1.0, hard_weight=0.0, temperature=2.0)
    assert obj.needs_teacher_logits and not obj.needs_teacher  # cached logits, no teacher forward
    loss, parts = obj(torch.tensor(STUDENT), torch.tensor([1, 0]), torch.tensor(TEACHER))
    assert set(parts) == {"kd"}
    assert loss.item() == pytest.approx(np_kd(STUDENT, TEACHER, 2.0), rel=1e-5)


def test_objective_mixes_both_weights() -> None:
    obj = PredictionObjective(kd_weight=0.7, hard_weight=0.5, temperature=2.0)
    logits, labels, teacher = torch.tensor(STUDENT, requires_grad=True), torch.tensor([1, 0]), torch.tensor(TEACHER)
    loss, parts = obj(logits, labels, teacher)
    kd = np_kd(STUDENT, TEACHER, 2.0)
    hard = F.cross_entropy(logits.detach(), labels).item()
    assert set(parts) == {"kd", "hard"}
    assert parts["kd"] == pytest.approx(kd, rel=1e-5)
    assert parts["hard"] == pytest.approx(hard, rel=1e-6)
    assert loss.item() == pytest.approx(0.7 * kd + 0.5 * hard, rel=1e-5)
    assert all(isinstance(v, float) for v in parts.values())
    loss.backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_objective_regression_uses_mse_kd() -> None:
    obj = PredictionObjective(kd_weight=1.0, hard_weight=1.0, is_regression=True)
    s, t, y = torch.tensor([[1.0], [2.0]]), torch.tensor([[0.0], [4.0]]), torch.tensor([1.0, 1.0])
    loss, parts = obj(s, y, t)
    assert parts["kd"] == pytest.approx(2.5)  # (1 + 4) / 2
    assert parts["hard"] == pytest.approx(0.5)  # (0 + 1) / 2
    assert loss.item() == pytest.approx(3.0)


def test_objective_without_teacher_logits_raises() -> None:
    obj = PredictionObjective(kd_weight=1.0, hard_weight=0.5)
    with pytest.raises(ValueError, match="teacher logits"):
        obj(torch.tensor(STUDENT), torch.tensor([1, 0]))
