"""Prediction-layer distillation losses as pure functions (float32 in, scalar out).

Hinton et al. (2015): KL between temperature-softened teacher and student distributions, scaled
by T^2 so its gradients keep their size as T changes; for regression the KD term is the MSE to
the teacher's outputs. Tang et al. (2019): the MSE between the logits themselves.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tinyplm.tasks.base import UNLABELLED_CLASS


def soft_target_kd(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """T^2 * KL(softmax(t/T) || softmax(s/T)), mean over the batch. Inputs ``(batch, classes)``."""
    t = temperature
    log_p_s = F.log_softmax(student_logits.float() / t, dim=-1)
    log_p_t = F.log_softmax(teacher_logits.float() / t, dim=-1)
    kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(-1).mean()
    return kl * (t * t)


def hard_label_loss(logits: torch.Tensor, labels: torch.Tensor, is_regression: bool,
                    class_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy with class ids ``(batch,)``, or MSE to scores for regression, over the labelled
    rows (an unlabelled one, ``tasks.base.UNLABELLED_CLASS`` or a NaN score, is skipped; a batch
    without any gives 0). ``class_weights`` ``(classes,)`` weigh each example by its class; the mean
    is then over the weights (torch's rule)."""
    keep = ~torch.isnan(labels) if is_regression else labels != UNLABELLED_CLASS
    if not bool(keep.all()):
        if not bool(keep.any()):
            return logits.float().sum() * 0.0  # still a graph: the step's other terms backpropagate
        logits, labels = logits[keep], labels[keep]
    if is_regression:
        return F.mse_loss(logits.float().squeeze(-1), labels.float())
    return F.cross_entropy(logits.float(), labels, weight=class_weights)


def logit_mse(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Mean squared error between student and teacher logits ``(batch, classes)`` (Tang et al.
    2019's objective for distilling BERT into a BiLSTM: the logits, not the softened probabilities)."""
    return F.mse_loss(student_logits.float(), teacher_logits.float())


def regression_kd(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """MSE between student and teacher regression outputs ``(batch, 1)``."""
    return F.mse_loss(student_logits.float(), teacher_logits.float())
