"""Tang et al.'s logit MSE and class-weighted cross-entropy in the prediction objective."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tinyplm.config.base import ObjectiveSpec
from tinyplm.tasks.heads import Head
from tinyplm.train.prediction import PredictionObjective


def test_logit_mse_is_the_mean_squared_logit_difference() -> None:
    student = torch.tensor([[1.0, -1.0], [0.5, 2.0]])
    teacher = torch.tensor([[3.0, -1.0], [0.5, 0.0]])
    obj = PredictionObjective(kd_weight=0.0, hard_weight=0.0, logit_mse=2.0)
    loss, parts = obj(student, torch.tensor([0, 1]), teacher)
    assert parts["logit_mse"] == pytest.approx((4 + 0 + 0 + 4) / 4)
    assert float(loss) == pytest.approx(2.0 * 2.0)
    assert obj.needs_teacher_logits


def test_logit_mse_needs_teacher_logits_and_a_sentence_head() -> None:
    with pytest.raises(ValueError, match="no teacher logits"):
        PredictionObjective(kd_weight=0.0, hard_weight=0.0, logit_mse=1.0)(torch.zeros(2, 2), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="token head"):
        PredictionObjective(logit_mse=1.0, head=Head.TOKEN)
    with pytest.raises(ValueError, match="logit_mse and the vector terms to 0"):
        ObjectiveSpec(kd_weight=0, logit_mse=1.0, mlm_hard=1.0)


def test_class_weights_weigh_the_hard_loss_by_class() -> None:
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    labels = torch.tensor([0, 1, 1])
    plain, _ = PredictionObjective(hard_weight=1.0)(logits, labels)
    weighted, _ = PredictionObjective(hard_weight=1.0, class_weights=(0.5, 3.0))(logits, labels)
    assert float(plain) == pytest.approx(float(F.cross_entropy(logits, labels)))
    expected = F.cross_entropy(logits, labels, weight=torch.tensor([0.5, 3.0]))
    assert float(weighted) == pytest.approx(float(expected))
    assert float(weighted) != pytest.approx(float(plain))
