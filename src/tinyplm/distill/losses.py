"""Distillation losses as pure functions (float32 in, scalar out).

Prediction-layer KD (Hinton et al. 2015): KL between temperature-softened teacher and student
distributions, scaled by T^2 so its gradients keep their size as T changes; for regression the KD
term is the MSE to the teacher's outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def soft_target_kd(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """T^2 * KL(softmax(t/T) || softmax(s/T)), mean over the batch. Inputs ``(batch, classes)``."""
    t = temperature
    log_p_s = F.log_softmax(student_logits.float() / t, dim=-1)
    log_p_t = F.log_softmax(teacher_logits.float() / t, dim=-1)
    kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(-1).mean()
    return kl * (t * t)


def hard_label_loss(logits: torch.Tensor, labels: torch.Tensor, is_regression: bool) -> torch.Tensor:
    """Cross-entropy with class ids ``(batch,)``, or MSE to scores for regression."""
    if is_regression:
        return F.mse_loss(logits.float().squeeze(-1), labels.float())
    return F.cross_entropy(logits.float(), labels)


def regression_kd(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """MSE between student and teacher regression outputs ``(batch, 1)``."""
    return F.mse_loss(student_logits.float(), teacher_logits.float())


@dataclass(frozen=True)
class PredictionObjective:
    """kd_weight * KD + hard_weight * hard loss. Fine-tuning is kd_weight=0, hard_weight=1.

    ``head`` picks the losses: ``sequence`` (above), ``span`` (start/end KD and cross-entropy over
    positions, ``distill.head_losses``) or ``token`` (per-piece KD and cross-entropy at labelled
    pieces). Per-token teacher logits may be wider than the batch; they are cut to its width.
    """

    kd_weight: float = 0.0
    hard_weight: float = 1.0
    temperature: float = 1.0
    is_regression: bool = False
    head: str = "sequence"

    @property
    def needs_teacher(self) -> bool:
        return self.kd_weight > 0

    def __call__(
        self, logits: torch.Tensor, labels: torch.Tensor, teacher_logits: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Return (loss, {part: value}) for one batch; ``mask`` ``(batch, seq)`` marks real
        tokens (a span head needs it so padding gets no probability)."""
        if self.kd_weight > 0 and teacher_logits is None:
            raise ValueError("this objective has kd_weight > 0 but no teacher logits were given")
        if self.head != "sequence" and teacher_logits is not None:
            teacher_logits = teacher_logits[:, : logits.shape[1]]
        parts = self._parts(logits, labels, teacher_logits, mask)
        weights = {"hard": self.hard_weight, "kd": self.kd_weight}
        loss = sum(weights[k] * v for k, v in parts.items())
        return loss, {k: float(v.detach()) for k, v in parts.items()}

    def _parts(self, logits, labels, teacher_logits, mask) -> dict[str, torch.Tensor]:
        from tinyplm.distill import head_losses as hl

        parts: dict[str, torch.Tensor] = {}
        kd = self.kd_weight > 0
        if self.head == "span":
            if mask is None:
                raise ValueError("span losses need the attention mask")
            s, e = logits[..., 0], logits[..., 1]
            if self.hard_weight > 0:
                parts["hard"] = hl.span_hard(s, e, labels, mask)
            if kd:
                parts["kd"] = hl.span_kd(s, e, teacher_logits[..., 0], teacher_logits[..., 1], mask, self.temperature)
        elif self.head == "token":
            if self.hard_weight > 0:
                parts["hard"] = hl.token_hard(logits, labels)
            if kd:
                parts["kd"] = hl.token_kd(logits.float(), teacher_logits.float(), labels, self.temperature)
        else:
            if self.hard_weight > 0:
                parts["hard"] = hard_label_loss(logits, labels, self.is_regression)
            if kd:
                parts["kd"] = (regression_kd(logits, teacher_logits) if self.is_regression
                               else soft_target_kd(logits, teacher_logits, self.temperature))
        return parts
